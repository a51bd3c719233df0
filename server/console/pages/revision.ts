import type { Deployment } from '../../../shared/schemas/deployment.ts';
import { isTerminal, type LogEntry, type Revision } from '../../../shared/schemas/revision.ts';
import { duration, type Html, h, status, time } from '../html.ts';
import { commitLink, triggerLabel } from './deployment.ts';
import { type Frame, page } from './layout.ts';

/** Lines of one log from cursor `from`; `next`: the cursor of the lines after them, when the page is full. */
export type LogPage = { lines: LogEntry[]; from: number; next: number | null };

export function revisionPage(input: {
  frame: Frame;
  live: string;
  deployment: Deployment;
  revision: Revision;
  build: LogPage;
  deploy: LogPage;
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
${logSection(link, 'build', 'Build log', input.build)}
${logSection(link, 'deploy', 'Deploy log', input.deploy)}`,
  });
}

function logSection(link: string, type: 'build' | 'deploy', title: string, log: LogPage): Html {
  const at = (from: number) => `${link}?${type}_from=${from}#${type}-h`;
  return h`<section aria-labelledby="${type}-h">
<h2 id="${type}-h">${title}</h2>
${
  log.lines.length === 0
    ? h`<p class="empty">No lines yet.</p>`
    : h`<pre class="log" tabindex="0" aria-label="${title}">${log.lines.map(
        (line) => h`<span class="line level-${line.level}"><span class="ts">${line.timestamp.slice(11, 23)}</span> ${line.message}
</span>`,
      )}</pre>`
}
${
  log.from > 0 || log.next !== null
    ? h`<nav class="pager" aria-label="${title} pages">
  ${log.from > 0 ? h`<a href="${at(0)}">&larr; From the start</a>` : h`<span></span>`}
  ${log.next !== null ? h`<a href="${at(log.next)}">Later lines &rarr;</a>` : h`<span></span>`}
</nav>`
    : ''
}
</section>`;
}
