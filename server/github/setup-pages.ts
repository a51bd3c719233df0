import { escapeHtml } from '../lib/escape-html.ts';
import type { InstallationAccount } from '../store/github.ts';
import type { LinkTarget } from './installation-links.ts';

/** Where the confirmation page posts: a console page of its own, no API key header needed. */
export const LINK_CONFIRM_PATH = '/console/github/link';

/**
 * Headers of the setup pages: nothing cached, the URL (it may carry a code) never sent on as a
 * referrer, no scripts, forms only to this server, never framed (a framed confirm button could be
 * clicked for the installer).
 */
export const SETUP_PAGE_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
};

/** A page that says what happened, with a link on (to try again through GitHub, or the next step) when there is one. */
export function messagePage(title: string, message: string, retryUrl?: string, linkText = 'Try again through GitHub'): string {
  const retry = retryUrl ? `<p><a href="${escapeHtml(retryUrl)}">${escapeHtml(linkText)}</a></p>` : '';
  return page(title, `<p>${escapeHtml(message)}</p>${retry}`);
}

/**
 * The page that asks the installer to confirm the link, naming both sides: the GitHub account and
 * the workspace. Without a workspace (GitHub's own Install button), it asks for an API key of one,
 * posted once with the form and never kept by the browser (`autocomplete="off"`).
 */
export function confirmationPage(input: {
  attempt: string;
  confirm: string;
  installationId: number;
  account: InstallationAccount;
  target: LinkTarget | null;
}): string {
  const { attempt, confirm, installationId, account, target } = input;
  const what = `the GitHub App's installation ${installationId} on ${account.type === 'Organization' ? 'the organization' : 'the account'} ${account.login}`;
  const where = target
    ? `<p>It will be linked to the workspace <strong>${escapeHtml(target.workspace_name)}</strong> (${escapeHtml(target.workspace_id)})${
        target.integration_name ? ` as the integration <strong>${escapeHtml(target.integration_name)}</strong>` : ''
      }. Its deployments will build the repositories the installation grants.</p>
<p>Link it only if you asked for this link yourself: someone who sent it to you would get access to these repositories.</p>`
    : `<p>No workspace asked for this installation (it was installed from GitHub). Give an API key of the workspace to link it to; it is used once and not kept.</p>
<p><label for="api_key">API key</label><br><input id="api_key" name="api_key" type="password" autocomplete="off" required></p>`;
  return page(
    'Link this GitHub installation?',
    `<p>You proved on GitHub that you can manage ${escapeHtml(what)}.</p>
<form method="post" action="${LINK_CONFIRM_PATH}">
${where}
<input type="hidden" name="attempt" value="${escapeHtml(attempt)}">
<input type="hidden" name="confirm" value="${escapeHtml(confirm)}">
<p><button type="submit">Link the installation</button></p>
</form>`,
  );
}

/** The frame of every page under `/console/github`: one heading, the body, no script. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}button{font-size:1rem;padding:.4rem 1rem}</style></head>
<body><main><h1>${escapeHtml(title)}</h1>
${body}
</main></body>
</html>
`;
}
