import type { Deployment } from '../../../shared/schemas/deployment.ts';
import type { Revision } from '../../../shared/schemas/revision.ts';
import { type Html, h, pager, status, time } from '../html.ts';
import { type Frame, notice, page } from './layout.ts';

/** One row of the deployments list: the deployment and its active and latest revisions, when it has them. */
export type DeploymentRow = { deployment: Deployment; active: Revision | null; latest: Revision | null };

export function deploymentsPage(input: {
  frame: Frame;
  live: string;
  rows: DeploymentRow[];
  nameContains: string | undefined;
  offset: number;
  limit: number;
  more: boolean;
  notice?: string;
}): Html {
  const { rows } = input;
  return page({
    title: 'Deployments',
    section: 'deployments',
    frame: input.frame,
    live: input.live,
    body: h`${notice('ok', input.notice)}
<form method="get" action="/console" class="filter" role="search">
  <label for="name_contains">Filter by name</label>
  <input id="name_contains" name="name_contains" type="search" value="${input.nameContains ?? ''}" maxlength="255">
  <button type="submit">Filter</button>
</form>
${
  rows.length === 0
    ? h`<p class="empty">${input.nameContains ? 'No deployment matches this filter.' : 'No deployments yet. Create one with the API, the CLI or the GitHub Action.'}</p>`
    : h`<div class="table-wrap"><table class="list">
<caption class="sr-only">Deployments of this workspace</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Source</th><th scope="col">Active revision</th><th scope="col">Latest revision</th><th scope="col">URL</th><th scope="col">Last change</th></tr></thead>
<tbody>${rows.map(deploymentRow)}</tbody>
</table></div>`
}
${pager('/console', { name_contains: input.nameContains }, input.offset, input.limit, input.more)}`,
  });
}

function deploymentRow({ deployment, active, latest }: DeploymentRow): Html {
  const url = deployment.source_config.custom_url;
  return h`<tr>
  <th scope="row" data-label="Name"><a href="/console/deployments/${deployment.id}">${deployment.name}</a></th>
  <td data-label="Status">${status(deployment.status)}</td>
  <td data-label="Source">${deployment.source}</td>
  <td data-label="Active revision">${active ? revisionCell(deployment.id, active) : h`<span class="muted">none</span>`}</td>
  <td data-label="Latest revision">${latest ? revisionCell(deployment.id, latest) : h`<span class="muted">none</span>`}</td>
  <td data-label="URL">${url ? h`<a href="${url}">${url}</a>` : h`<span class="muted">&mdash;</span>`}</td>
  <td data-label="Last change">${time(deployment.updated_at)}</td>
</tr>`;
}

function revisionCell(deploymentId: string, revision: Revision): Html {
  return h`<a href="/console/deployments/${deploymentId}/revisions/${revision.id}"><code>${revision.id.slice(0, 8)}</code></a> ${status(revision.status)}`;
}
