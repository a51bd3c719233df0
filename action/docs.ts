import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';

const ROOT = resolve(import.meta.dirname, '..');
export const ACTION_YML = resolve(ROOT, 'action.yml');
export const ACTION_DOC = resolve(ROOT, 'docs/action.md');

const ActionYml = z.object({
  inputs: z.record(z.string(), z.object({ description: z.string(), required: z.boolean().optional(), default: z.string().optional() })),
  outputs: z.record(z.string(), z.object({ description: z.string() })),
});

const BEGIN = (part: string) => `<!-- generated from action.yml by \`npm run docs:action\`: ${part} -->`;
const END = (part: string) => `<!-- end of generated ${part} -->`;

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
}

/** The inputs and outputs tables, from action.yml. */
export function renderTables(actionYml: string): { inputs: string; outputs: string } {
  const spec = ActionYml.parse(parse(actionYml));
  const inputs = [
    '| input | required | default | description |',
    '|---|---|---|---|',
    ...Object.entries(spec.inputs).map(
      ([name, input]) =>
        `| \`${name}\` | ${input.required ? 'yes' : 'no'} | ${input.default !== undefined ? `\`${cell(input.default)}\`` : ''} | ${cell(input.description)} |`,
    ),
  ].join('\n');
  const outputs = [
    '| output | description |',
    '|---|---|',
    ...Object.entries(spec.outputs).map(([name, output]) => `| \`${name}\` | ${cell(output.description)} |`),
  ].join('\n');
  return { inputs, outputs };
}

/** The doc with the parts between the markers replaced by tables generated from action.yml. */
export function renderActionDoc(actionYml: string, doc: string): string {
  const tables = renderTables(actionYml);
  let out = doc;
  for (const part of ['inputs', 'outputs'] as const) {
    const begin = BEGIN(part);
    const end = END(part);
    const from = out.indexOf(begin);
    const to = out.indexOf(end);
    if (from < 0 || to < from) throw new Error(`docs/action.md lacks the markers ${begin} … ${end}`);
    out = `${out.slice(0, from + begin.length)}\n${tables[part]}\n${out.slice(to)}`;
  }
  return out;
}

if (import.meta.main) {
  writeFileSync(ACTION_DOC, renderActionDoc(readFileSync(ACTION_YML, 'utf8'), readFileSync(ACTION_DOC, 'utf8')));
  console.log(`updated ${ACTION_DOC}`);
}
