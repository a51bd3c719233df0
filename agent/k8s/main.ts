import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import { connectionOptions, numberOption } from '../cli-options.ts';
import { runUntilSignal } from '../run-until-signal.ts';
import { tracingOrExit } from '../tracing.ts';
import { Cluster, loadKubeConfig } from './cluster.ts';
import { K8sAgent } from './k8s-agent.ts';

const USAGE = `Usage: npm run agent -- --compute k8s --url <control plane URL> --listener <listener id> [--token <token>]
  [--kubeconfig FILE] [--namespace NS]... [--keep-volumes] [--capacity 4] [--agent-id <id>]
  [--rollout-timeout 600] [--poll-interval 2] [--postgres-image IMAGE] [--redis-image IMAGE]
Cluster credentials: --kubeconfig FILE, else the file KUBECONFIG names, else the in-cluster service account.
--namespace (repeatable, or comma-separated): the namespaces the agent may use; a deployment in any
other is refused before anything is sent. A deployment without k8s_namespace goes to the first one
(else the kubeconfig context's namespace, else "default").
--postgres-image / --redis-image: the data stores' images (default pgvector/pgvector:pg16 and
redis:7-alpine), e.g. from a mirror the nodes can reach.
The token may come from CONTROL_PLANE_AGENT_TOKEN instead of --token (it is then not visible in ps).`;

/** Reads the options once, starts the k8s agent, stops it cleanly on SIGINT / SIGTERM. */
export async function runK8sAgent(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      compute: { type: 'string' },
      url: { type: 'string' },
      token: { type: 'string' },
      listener: { type: 'string' },
      kubeconfig: { type: 'string' },
      namespace: { type: 'string', multiple: true },
      namespaces: { type: 'string', multiple: true },
      'keep-volumes': { type: 'boolean', default: false },
      capacity: { type: 'string', default: '4' },
      'agent-id': { type: 'string' },
      'rollout-timeout': { type: 'string', default: '600' },
      'poll-interval': { type: 'string', default: '2' },
      'postgres-image': { type: 'string' },
      'redis-image': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  const { url, listenerId, token } = connectionOptions(values, env, USAGE);
  const number = (name: string, value: string, min: number) => numberOption(name, value, min, 'number');
  const namespaces = [...(values.namespace ?? []), ...(values.namespaces ?? [])]
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
  let config: KubeConfig;
  try {
    config = loadKubeConfig(values.kubeconfig, env);
  } catch (error) {
    process.stderr.write(`agent: no Kubernetes credentials: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  }
  const contextNamespace = config.getContextObject(config.getCurrentContext())?.namespace;
  const tracing = await tracingOrExit(env, 'k8s-agent');
  const agent = new K8sAgent({
    url,
    token,
    listenerId,
    agentId: values['agent-id'] ?? `${hostname()}-${process.pid}`,
    version: 'k8s-agent/0.1.0',
    capacity: Math.floor(number('capacity', values.capacity, 1)),
    cluster: new Cluster(config),
    namespaces,
    defaultNamespace: namespaces[0] ?? contextNamespace ?? 'default',
    keepVolumes: values['keep-volumes'],
    rolloutTimeoutMs: number('rollout-timeout', values['rollout-timeout'], 1) * 1000,
    pollMs: number('poll-interval', values['poll-interval'], 0.05) * 1000,
    images: {
      ...(values['postgres-image'] ? { postgres: values['postgres-image'] } : {}),
      ...(values['redis-image'] ? { redis: values['redis-image'] } : {}),
    },
    print: (line) => process.stdout.write(`${line}\n`),
    tracing,
  });
  await runUntilSignal({ start: () => agent.start(), stop: () => agent.stop() }, tracing);
}
