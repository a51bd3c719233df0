import type { ApiKey, ApiKeyCreated } from '../../../shared/schemas/api-key.ts';
import type { GithubTrust } from '../../../shared/schemas/github-trust.ts';
import type { GithubIntegration } from '../../../shared/schemas/integration.ts';
import type { Listener } from '../../../shared/schemas/listener.ts';
import { type Html, h, postForm, time } from '../html.ts';
import { type Frame, notice, page } from './layout.ts';

/** Whether a listener's agent was heard from recently enough to count as healthy; the built-in sandbox always is. */
export function listenerHealth(listener: Listener, now: string, healthyWithinMs: number): 'healthy' | 'silent' | 'never seen' | 'built in' {
  if (listener.compute_type === 'sandbox') return 'built in';
  if (!listener.last_seen_at) return 'never seen';
  return Date.parse(now) - Date.parse(listener.last_seen_at) <= healthyWithinMs ? 'healthy' : 'silent';
}

export function listenersPage(input: { frame: Frame; listeners: Listener[]; now: string; healthyWithinMs: number }): Html {
  return page({
    title: 'Listeners',
    section: 'listeners',
    frame: input.frame,
    body:
      input.listeners.length === 0
        ? h`<p class="empty">No listeners in this workspace.</p>`
        : h`<div class="table-wrap"><table class="list">
<caption class="sr-only">Listeners and their agents</caption>
<thead><tr><th scope="col">Compute</th><th scope="col">Type</th><th scope="col">Health</th><th scope="col">Last heartbeat</th><th scope="col">Agent version</th><th scope="col">Capacity</th></tr></thead>
<tbody>${input.listeners.map((listener) => {
            const health = listenerHealth(listener, input.now, input.healthyWithinMs);
            return h`<tr>
  <th scope="row" data-label="Compute"><code>${listener.compute_id}</code></th>
  <td data-label="Type">${listener.compute_type}</td>
  <td data-label="Health"><span class="badge badge-${health === 'healthy' || health === 'built in' ? 'ok' : health === 'silent' ? 'bad' : 'quiet'}">${health}</span></td>
  <td data-label="Last heartbeat">${time(listener.last_seen_at)}</td>
  <td data-label="Agent version">${listener.agent_version ?? '—'}</td>
  <td data-label="Capacity">${listener.agent_capacity ?? '—'}</td>
</tr>`;
          })}</tbody>
</table></div>`,
  });
}

export function integrationsPage(input: { frame: Frame; integrations: GithubIntegration[] }): Html {
  return page({
    title: 'GitHub integrations',
    section: 'integrations',
    frame: input.frame,
    body:
      input.integrations.length === 0
        ? h`<p class="empty">No GitHub integration in this workspace yet.</p>`
        : h`<div class="table-wrap"><table class="list">
<caption class="sr-only">GitHub integrations</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Installation</th><th scope="col">ID</th></tr></thead>
<tbody>${input.integrations.map(
            (integration) =>
              h`<tr><th scope="row" data-label="Name">${integration.name}</th><td data-label="Installation">${integration.installation_id}</td><td data-label="ID"><code>${integration.id}</code></td></tr>`,
          )}</tbody>
</table></div>`,
  });
}

export function apiKeysPage(input: { frame: Frame; keys: ApiKey[]; currentKeyId: string; created?: ApiKeyCreated; error?: string; notice?: string }): Html {
  const { frame } = input;
  return page({
    title: 'API keys',
    section: 'api-keys',
    frame,
    body: h`${notice('error', input.error)}${notice('ok', input.notice)}
${
  input.created
    ? h`<section class="card created" aria-labelledby="created-h">
<h2 id="created-h">New key</h2>
<p>Copy it now: it is shown this once and never again.</p>
<p><label for="created-key">Key</label><input id="created-key" readonly value="${input.created.key}" class="mono"></p>
</section>`
    : ''
}
${
  frame.organizationScoped
    ? postForm(
        '/console/api-keys',
        frame.csrf,
        h`<h2>Create a key</h2>
<label for="description">Description</label>
<input id="description" name="description" maxlength="500">
<fieldset><legend>Scope</legend>
<label><input type="radio" name="scope" value="workspace" checked> This workspace only</label>
<label><input type="radio" name="scope" value="organization"> Whole organization</label>
</fieldset>
<button type="submit">Create key</button>`,
        'card',
      )
    : h`<p class="muted">Only an organization-scoped key may create or revoke keys.</p>`
}
<div class="table-wrap"><table class="list">
<caption>Keys</caption>
<thead><tr><th scope="col">Description</th><th scope="col">Scope</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${input.keys.map(
      (key) => h`<tr>
  <th scope="row" data-label="Description">${key.description ?? h`<span class="muted">(none)</span>`}${key.id === input.currentKeyId ? h` <span class="tag">this session</span>` : ''}<div class="muted small"><code>${key.id}</code></div></th>
  <td data-label="Scope">${key.workspace_id ? 'workspace' : 'organization'}</td>
  <td data-label="Created">${time(key.created_at)}</td>
  <td data-label="Expires">${time(key.expires_at)}</td>
  <td data-label="Actions">${frame.organizationScoped ? h`<a class="button small danger" href="/console/api-keys/${key.id}/revoke">Revoke</a>` : ''}</td>
</tr>`,
    )}</tbody>
</table></div>`,
  });
}

export function trustPage(input: { frame: Frame; entries: GithubTrust[]; error?: string; notice?: string }): Html {
  const { frame } = input;
  return page({
    title: 'Keyless trust',
    section: 'trust',
    frame,
    body: h`${notice('error', input.error)}${notice('ok', input.notice)}
<p class="muted">GitHub repositories whose Actions workflows may exchange their OIDC token for a short-lived key of this workspace.</p>
${
  frame.organizationScoped
    ? postForm(
        '/console/trust',
        frame.csrf,
        h`<h2>Trust a repository</h2>
<p class="muted">By GitHub's numeric ids (names can be recycled); the other fields narrow which workflow runs match.</p>
<label for="repository_id">Repository ID</label><input id="repository_id" name="repository_id" inputmode="numeric" required>
<label for="repository_owner_id">Repository owner ID</label><input id="repository_owner_id" name="repository_owner_id" inputmode="numeric" required>
<label for="ref">Ref (optional, e.g. refs/heads/main)</label><input id="ref" name="ref">
<label for="environment">Environment (optional)</label><input id="environment" name="environment">
<label for="job_workflow_ref">Workflow (optional, owner/repo/.github/workflows/deploy.yml@refs/heads/main)</label><input id="job_workflow_ref" name="job_workflow_ref">
<label for="trust-description">Description (optional)</label><input id="trust-description" name="description" maxlength="500">
<button type="submit">Add trust entry</button>`,
        'card',
      )
    : h`<p class="muted">Only an organization-scoped key may add or remove trust entries.</p>`
}
${
  input.entries.length === 0
    ? h`<p class="empty">No trust entries in this workspace.</p>`
    : h`<div class="table-wrap"><table class="list">
<caption class="sr-only">Trust entries</caption>
<thead><tr><th scope="col">Repository ID</th><th scope="col">Owner ID</th><th scope="col">Ref</th><th scope="col">Environment</th><th scope="col">Workflow</th><th scope="col">Description</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${input.entries.map(
        (entry) => h`<tr>
  <th scope="row" data-label="Repository ID">${entry.repository_id}</th>
  <td data-label="Owner ID">${entry.repository_owner_id}</td>
  <td data-label="Ref">${entry.ref ?? 'any'}</td>
  <td data-label="Environment">${entry.environment ?? 'any'}</td>
  <td data-label="Workflow">${entry.job_workflow_ref ?? 'any'}</td>
  <td data-label="Description">${entry.description ?? ''}</td>
  <td data-label="Created">${time(entry.created_at)}</td>
  <td data-label="Actions">${frame.organizationScoped ? h`<a class="button small danger" href="/console/trust/${entry.id}/remove">Remove</a>` : ''}</td>
</tr>`,
      )}</tbody>
</table></div>`
}`,
  });
}
