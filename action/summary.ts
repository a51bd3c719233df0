import type { DeployResult } from '../shared/deploy/deploy.ts';

/** A row of `core.summary.addTable` (its type is not exported from the package's entry). */
type SummaryTableRow = Array<string | { data: string; header?: boolean }>;

/** The part of `core.summary` this file uses. */
export type Summary = {
  addHeading(text: string, level?: number): Summary;
  addTable(rows: SummaryTableRow[]): Summary;
  addRaw(text: string, addEOL?: boolean): Summary;
  addCodeBlock(code: string, lang?: string): Summary;
};

const VERDICT: Record<DeployResult['outcome'], string> = {
  deployed: '✅ Deployed',
  unchanged: '☑️ No new revision (nothing to deploy)',
  'not-waited': '⏩ Requested (not waited for)',
  failed: '❌ Failed',
  timeout: '⏱️ Timed out',
  cancelled: '🛑 Cancelled',
  error: '❌ Error',
};

function escape(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

/** The job summary of one run: the deployment, the revision, each status with its time, the URL or the reason. */
export function renderSummary(summary: Summary, result: DeployResult, label: string): void {
  const deployment = result.deployment;
  summary.addHeading(`Deploy ${escape(deployment?.name ?? label)}: ${VERDICT[result.outcome]}`, 2);
  const rows: SummaryTableRow[] = [
    ['Deployment', deployment ? `${escape(deployment.name)} (<code>${deployment.id}</code>)${result.action ? `, ${result.action}` : ''}` : '—'],
    ['Revision', result.revisionId ? `<code>${result.revisionId}</code>` : '—'],
    ['Status', result.status ?? '—'],
  ];
  if (result.url) rows.push(['URL', `<a href="${escape(result.url)}">${escape(result.url)}</a>`]);
  if (result.supersededBy) rows.push(['Superseded by', `<code>${result.supersededBy}</code>`]);
  if (result.reason) rows.push(['Reason', escape(result.reason)]);
  summary.addTable([
    [
      { data: 'Field', header: true },
      { data: 'Value', header: true },
    ],
    ...rows,
  ]);
  if (result.transitions.length) {
    summary.addHeading('Status transitions', 3);
    summary.addTable([
      [
        { data: 'Status', header: true },
        { data: 'At (revision updated_at)', header: true },
        { data: 'Seen by this run', header: true },
        { data: 'Message', header: true },
      ],
      ...result.transitions.map((t) => [t.status, t.at, t.seenAt, t.message ? escape(t.message) : '—']),
    ]);
  }
  const lines = [
    ...result.logs.build.map((l) => `[build] ${l.timestamp} ${l.level} ${l.message}`),
    ...result.logs.deploy.map((l) => `[deploy] ${l.timestamp} ${l.level} ${l.message}`),
  ];
  if (lines.length) {
    summary.addHeading('Last log lines', 3);
    summary.addCodeBlock(lines.join('\n'), 'text');
  }
}
