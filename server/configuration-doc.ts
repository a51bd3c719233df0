import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { z } from 'zod';
import { Config } from './config.ts';

const ROOT = resolve(import.meta.dirname, '..');
export const CONFIGURATION_DOC = resolve(ROOT, 'docs/configuration.md');

const BEGIN = '<!-- generated from server/config.ts by `npm run docs:config`: settings -->';
const END = '<!-- end of generated settings -->';

type Def = { type: string; in?: z.ZodType; innerType?: z.ZodType; defaultValue?: unknown };

/**
 * The default an operator would write in the environment: the value before the schema's
 * transforms (`github.com`, not `['github.com']`), found by unwrapping pipes down to the default.
 */
function environmentDefault(schema: z.ZodType): string | undefined {
  let def = schema._zod.def as Def;
  for (;;) {
    if (def.type === 'default') return String(def.defaultValue);
    const inner = def.type === 'pipe' ? def.in : def.innerType;
    if (!inner) return undefined;
    def = inner._zod.def as Def;
  }
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
}

/** The settings table: one row per field of `Config`, in the schema's order. */
export function renderSettingsTable(): string {
  const rows = Object.entries(Config.shape).map(([name, schema]) => {
    const description = schema.description;
    if (!description) throw new Error(`server/config.ts: ${name} has no .describe(): every setting is documented there.`);
    const fallback = environmentDefault(schema);
    return `| \`${name}\` | ${fallback === undefined ? 'unset' : fallback === '' ? '(empty)' : `\`${cell(fallback)}\``} | ${cell(description)} |`;
  });
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** The page with the part between the markers replaced by the table generated from `Config`. */
export function renderConfigurationDoc(doc: string): string {
  const from = doc.indexOf(BEGIN);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`docs/configuration.md lacks the markers ${BEGIN} … ${END}`);
  return `${doc.slice(0, from + BEGIN.length)}\n${renderSettingsTable()}\n${doc.slice(to)}`;
}

if (import.meta.main) {
  writeFileSync(CONFIGURATION_DOC, renderConfigurationDoc(readFileSync(CONFIGURATION_DOC, 'utf8')));
  console.log(`updated ${CONFIGURATION_DOC}`);
}
