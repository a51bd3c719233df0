import { Annotation, END, START, StateGraph } from '@langchain/langgraph';

// One node that answers without a model, so the demo needs no API key: it greets whoever is named.
const State = Annotation.Root({ name: Annotation(), answer: Annotation() });

export const graph = new StateGraph(State)
  .addNode('greet', (state) => ({ answer: `hello, ${state.name ?? 'world'}, from a graph deployed by the control plane` }))
  .addEdge(START, 'greet')
  .addEdge('greet', END)
  .compile();
