import type { Deployment } from '../../../shared/schemas/deployment.ts';
import { isTerminal, type LogEntry, type Revision } from '../../../shared/schemas/revision.ts';
import { duration, type Html, h, status, time } from '../html.ts';
import { commitLink, triggerLabel } from './deployment.ts';
import { type Frame, page } from './layout.ts';

export function revisionPage(input: {
  frame: Frame;
  live: string;
  deployment: Deployment;
  revision: Revision;
  buildLogs: LogEntry[];
  deployLogs: LogEntry[];
  githubWebUrl: string;
}): Html {
  const { deployment: d, revision: r } = input;
  const ended = isTerminal(r.status);
  const link = `/console/deployments/${d.id}/revisions/${r.id}`;
  return page({
    title: `Revision ${r.id.slice(0, 8)}`,
    section: 'deployments',
    frame: input.frame,
    live: input.live,
    body: h`<p class="crumbs"><a href="/console">Deployments</a> / <a href="/console/deployments/${d.id}">${d.name}</a> / ${r.id.slice(0, 8)}</p>
<div class="actions">
  ${ended ? '' : h`<a class="button" href="${link}/interrupt">Interrupt</a>`}
  ${r.status === 'DEPLOYED' && r.id !== d.active_revision_id && d.status !== 'AWAITING_DELETE' ? h`<a class="button" href="${link}/rollback">Roll back to this</a>` : ''}
</div>
<section class="card" aria-labelledby="rev-h">
<h2 id="rev-h">Summary</h2>
<dl class="facts">
  <dt>Status</dt><dd>${status(r.status)}${r.status_message ? h` <span class="muted">${r.status_message}</span>` : ''}</dd>
  <dt>ID</dt><dd><code>${r.id}</code></dd>
  <dt>Trigger</dt><dd>${triggerLabel(r, d)}</dd>
  <dt>Commit</dt><dd>${commitLink(d, r, input.githubWebUrl)}</dd>
  <dt>Branch</dt><dd>${r.source_revision_config.repo_ref ?? '—'}</dd>
  <dt>Started</dt><dd>${time(r.created_at)}</dd>
  <dt>Duration</dt><dd>${ended ? duration(r.created_at, r.updated_at) : 'running'}</dd>
</dl>
</section>
${logSection('build', 'Build log', input.buildLogs)}
${logSection('deploy', 'Deploy log', input.deployLogs)}`,
  });
}

function logSection(id: string, title: string, lines: LogEntry[]): Html {
  return h`<section aria-labelledby="${id}-h">
<h2 id="${id}-h">${title}</h2>
${
  lines.length === 0
    ? h`<p class="empty">No lines yet.</p>`
    : h`<pre class="log" tabindex="0" aria-label="${title}">${lines.map(
        (line) => h`<span class="line level-${line.level}"><span class="ts">${line.timestamp.slice(11, 23)}</span> ${line.message}
</span>`,
      )}</pre>`
}
</section>`;
}
