import type { Deployment } from '../../../shared/schemas/deployment.ts';
import { isTerminal, type Revision } from '../../../shared/schemas/revision.ts';
import { duration, githubRepoLink, githubWebPath, type Html, h, pager, status, time } from '../html.ts';
import { type Frame, notice, page } from './layout.ts';

/** What a revision was started by, in the words of the contract's list (API, push, pull request, redeploy). */
export function triggerLabel(revision: Revision, deployment: Deployment): string {
  switch (revision.trigger) {
    case 'create':
    case 'patch':
      return 'API';
    case 'push':
      return deployment.pull_request ? 'pull request' : 'push';
    case 'redeploy':
      return 'redeploy';
  }
}

/** The commit of a revision, linked to GitHub when the repository is there. */
export function commitLink(deployment: Deployment, revision: Revision, githubWebUrl: string): Html {
  const sha = revision.source_revision_config.repo_commit_sha;
  if (!sha) return h`<span class="muted">&mdash;</span>`;
  const web = deployment.source_config.repo_url ? githubWebPath(deployment.source_config.repo_url, githubWebUrl) : null;
  return web ? h`<a href="${web}/commit/${sha}"><code>${sha.slice(0, 7)}</code></a>` : h`<code>${sha.slice(0, 7)}</code>`;
}

export function deploymentPage(input: {
  frame: Frame;
  live: string;
  deployment: Deployment;
  revisions: Revision[];
  offset: number;
  limit: number;
  more: boolean;
  githubWebUrl: string;
  notice?: string;
}): Html {
  const { deployment: d, githubWebUrl } = input;
  const base = `/console/deployments/${d.id}`;
  const web = d.source_config.repo_url ? githubWebPath(d.source_config.repo_url, githubWebUrl) : null;
  const branch = d.source_revision_config.repo_ref;
  const deleting = d.status === 'AWAITING_DELETE';
  return page({
    title: d.name,
    section: 'deployments',
    frame: input.frame,
    live: input.live,
    body: h`${notice('ok', input.notice)}
<p class="crumbs"><a href="/console">Deployments</a> / ${d.name}</p>
<div class="actions">
  ${deleting ? '' : h`<a class="button" href="${base}/redeploy">Redeploy</a><a class="button danger" href="${base}/delete">Delete</a>`}
</div>
<section aria-labelledby="settings-h" class="card">
<h2 id="settings-h">Settings</h2>
<dl class="facts">
  <dt>Status</dt><dd>${status(d.status)}</dd>
  <dt>ID</dt><dd><code>${d.id}</code></dd>
  <dt>Source</dt><dd>${d.source}</dd>
  <dt>URL</dt><dd>${d.source_config.custom_url ? h`<a href="${d.source_config.custom_url}">${d.source_config.custom_url}</a>` : h`<span class="muted">&mdash;</span>`}</dd>
  <dt>Repository</dt><dd>${githubRepoLink(d.source_config.repo_url, githubWebUrl)}</dd>
  <dt>Branch</dt><dd>${branch ? (web ? h`<a href="${web}/tree/${branch}">${branch}</a>` : h`<code>${branch}</code>`) : h`<span class="muted">&mdash;</span>`}</dd>
  <dt>Build on push</dt><dd>${d.source_config.build_on_push === null ? '—' : d.source_config.build_on_push ? 'yes' : 'no'}</dd>
  <dt>Graph config</dt><dd>${d.source_revision_config.graph_config_path ?? '—'}</dd>
  <dt>Image</dt><dd>${d.source_revision_config.image_uri ?? d.image_version ?? '—'}</dd>
  <dt>Listener</dt><dd>${d.source_config.listener_id ? h`<code>${d.source_config.listener_id}</code>` : '—'}</dd>
  ${d.pull_request ? h`<dt>Preview of</dt><dd><a href="/console/deployments/${d.parent_deployment_id}">parent deployment</a>, pull request #${d.pull_request}</dd>` : ''}
  <dt>Secrets</dt><dd>${d.secrets.length === 0 ? h`<span class="muted">none</span>` : h`<ul class="names">${d.secrets.map((secret) => h`<li><code>${secret.name}</code></li>`)}</ul><p class="muted">Values are never shown.</p>`}</dd>
  <dt>Created</dt><dd>${time(d.created_at)}</dd>
  <dt>Last change</dt><dd>${time(d.updated_at)}</dd>
</dl>
</section>
<section aria-labelledby="revisions-h">
<h2 id="revisions-h">Revisions</h2>
<div class="table-wrap"><table class="list">
<caption class="sr-only">Revisions, newest first</caption>
<thead><tr><th scope="col">Revision</th><th scope="col">Status</th><th scope="col">Trigger</th><th scope="col">Commit</th><th scope="col">Started</th><th scope="col">Duration</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${input.revisions.map((revision) => revisionRow(d, revision, githubWebUrl, deleting))}</tbody>
</table></div>
${pager(base, {}, input.offset, input.limit, input.more)}
</section>`,
  });
}

function revisionRow(d: Deployment, revision: Revision, githubWebUrl: string, deleting: boolean): Html {
  const link = `/console/deployments/${d.id}/revisions/${revision.id}`;
  const ended = isTerminal(revision.status);
  const canRollBack = !deleting && revision.status === 'DEPLOYED' && revision.id !== d.active_revision_id;
  return h`<tr>
  <th scope="row" data-label="Revision"><a href="${link}"><code>${revision.id.slice(0, 8)}</code></a>${revision.id === d.active_revision_id ? h` <span class="tag">active</span>` : ''}</th>
  <td data-label="Status">${status(revision.status)}${revision.status_message ? h`<div class="muted small">${revision.status_message}</div>` : ''}</td>
  <td data-label="Trigger">${triggerLabel(revision, d)}</td>
  <td data-label="Commit">${commitLink(d, revision, githubWebUrl)}</td>
  <td data-label="Started">${time(revision.created_at)}</td>
  <td data-label="Duration">${ended ? duration(revision.created_at, revision.updated_at) : h`<span class="muted">running</span>`}</td>
  <td data-label="Actions">${canRollBack ? h`<a class="button small" href="${link}/rollback">Roll back to this</a>` : ''}${ended ? '' : h`<a class="button small" href="${link}/interrupt">Interrupt</a>`}</td>
</tr>`;
}
