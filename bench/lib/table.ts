import type { LoadResult } from './load.ts';

/** One line of the results table. Latencies in ms. */
export type Row = {
  scenario: string;
  rps?: number;
  p50?: number;
  p99?: number;
  max?: number;
  /** Our figure against the baseline's, e.g. "62% of sqlite GET". */
  ratio?: string;
  target?: string;
  /** "met", "MISSED" or "" when there is no target. */
  verdict?: string;
  note?: string;
};

export function loadRow(scenario: string, result: LoadResult, extra: Partial<Row> = {}): Row {
  const note = result.failures > 0 ? `${result.failures} failed responses` : undefined;
  return { scenario, rps: result.rps, p50: result.p50, p99: result.p99, max: result.max, ...(note ? { note } : {}), ...extra };
}

const fmt = (value: number | undefined, digits = 2) =>
  value === undefined || Number.isNaN(value) ? '' : value >= 100 ? value.toFixed(0) : value.toFixed(digits);

/** The table as Markdown (it reads well in a terminal too). */
export function renderTable(rows: Row[]): string {
  const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'vs baseline', 'target', 'verdict', 'note'];
  const lines = rows.map((r) => [
    r.scenario,
    r.rps === undefined ? '' : Math.round(r.rps).toString(),
    fmt(r.p50),
    fmt(r.p99),
    fmt(r.max),
    r.ratio ?? '',
    r.target ?? '',
    r.verdict ?? '',
    r.note ?? '',
  ]);
  const all = [header, ...lines];
  const widths = header.map((_, i) => Math.max(...all.map((line) => line[i]!.length)));
  const render = (line: string[]) => `| ${line.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`;
  return [render(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...lines.map(render)].join('\n');
}

export const percent = (ours: number, base: number) => `${Math.round((ours / base) * 100)}%`;
export const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
