import { escapeHtml } from '../lib/escape-html.ts';
import { NEW_APP_PATH } from './manifest-flow.ts';
import { page, SETUP_PAGE_HEADERS } from './setup-pages.ts';

/** The setup pages' headers, with forms allowed to post to GitHub's web host too (the manifest goes there). */
export function manifestPageHeaders(githubUrl: string): Record<string, string> {
  return {
    ...SETUP_PAGE_HEADERS,
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${new URL(githubUrl).origin}; frame-ancestors 'none'`,
  };
}

/**
 * The first page: an operator's organization-scoped API key (posted once with the form, never kept
 * by the browser), the GitHub organization to register the App under, and its name.
 */
export function newAppPage(message?: string): string {
  return page(
    'Create the GitHub App',
    `${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<p>GitHub makes the App from this control plane's manifest: its permissions, events and URLs are filled in, and its keys and secrets come back here, stored encrypted. Nothing is copied by hand.</p>
<p>Register it under your GitHub organization, so that it outlives anyone's personal account.</p>
<form method="post" action="${NEW_APP_PATH}">
<p><label for="api_key">Organization API key of this control plane</label><br><input id="api_key" name="api_key" type="password" autocomplete="off" required></p>
<p><label for="github_organization">GitHub organization (empty: your personal account)</label><br><input id="github_organization" name="github_organization" type="text" pattern="[A-Za-z0-9-]{1,39}"></p>
<p><label for="app_name">App name (unique on GitHub)</label><br><input id="app_name" name="app_name" type="text" maxlength="34"></p>
<p><button type="submit">Continue</button></p>
</form>`,
  );
}

/** The second page: the manifest, posted to GitHub by the operator's click (GitHub's manifest flow takes a form POST). */
export function postManifestPage(action: string, manifest: Record<string, unknown>): string {
  return page(
    'Create the GitHub App on GitHub',
    `<p>GitHub asks you to confirm the App's name, then sends you back here.</p>
<form method="post" action="${escapeHtml(action)}">
<input type="hidden" name="manifest" value="${escapeHtml(JSON.stringify(manifest))}">
<p><button type="submit">Create the App on GitHub</button></p>
</form>`,
  );
}
