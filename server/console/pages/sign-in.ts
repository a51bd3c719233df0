import type { Workspace } from '../../../shared/schemas/workspace.ts';
import { type Html, h, postForm } from '../html.ts';
import { type Frame, notice, page } from './layout.ts';

/** The sign-in form: an API key, exchanged for a session; the key itself is never kept by the browser. */
export function signInPage(input: { csrf: string; error?: string; next?: string }): Html {
  return page({
    title: 'Sign in',
    section: 'none',
    body: h`${notice('error', input.error)}
<form method="post" action="/console/sign-in" class="card narrow" autocomplete="off">
  <input type="hidden" name="csrf" value="${input.csrf}">
  ${input.next ? h`<input type="hidden" name="next" value="${input.next}">` : ''}
  <label for="key">API key</label>
  <input id="key" name="key" type="password" required autocomplete="off" spellcheck="false" aria-describedby="key-help">
  <p id="key-help" class="muted">The key is exchanged for a session of at most 12 hours; your browser keeps only the session, never the key. Revoking the key ends the session.</p>
  <button type="submit">Sign in</button>
</form>`,
  });
}

/** An organization key's workspaces, to pick the one the console shows. */
export function workspacesPage(input: { frame: Frame; workspaces: Workspace[]; current: string }): Html {
  return page({
    title: 'Workspaces',
    section: 'workspaces',
    frame: input.frame,
    body: h`<table>
<caption class="sr-only">Workspaces of your organization</caption>
<thead><tr><th scope="col">Name</th><th scope="col">ID</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
<tbody>${input.workspaces.map(
      (workspace) => h`<tr>
  <td>${workspace.name}</td><td><code>${workspace.id}</code></td>
  <td>${
    workspace.id === input.current
      ? h`<span class="muted">Current</span>`
      : postForm(
          '/console/workspaces',
          input.frame.csrf,
          h`<input type="hidden" name="workspace_id" value="${workspace.id}"><button type="submit">Use ${workspace.name}</button>`,
        )
  }</td>
</tr>`,
    )}</tbody>
</table>`,
  });
}

/** A page that answers a request it could not carry out (not found, refused). */
export function errorPage(input: { status: number; detail: string; frame?: Frame }): Html {
  return page({
    title: input.status === 404 ? 'Not found' : 'Something is wrong',
    section: 'none',
    frame: input.frame,
    body: h`${notice('error', input.detail)}<p><a href="/console">Back to deployments</a></p>`,
  });
}

/** Asks before an action that changes things: the form posts only from here. */
export function confirmPage(input: { frame: Frame; title: string; question: string; action: string; button: string; back: string; danger?: boolean }): Html {
  return page({
    title: input.title,
    section: 'deployments',
    frame: input.frame,
    body: h`<div class="card narrow">
<p>${input.question}</p>
<div class="actions">
${postForm(input.action, input.frame.csrf, h`<button type="submit" class="${input.danger ? 'danger' : ''}">${input.button}</button>`)}
<a href="${input.back}" class="button secondary">Cancel</a>
</div>
</div>`,
  });
}
