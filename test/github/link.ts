import type { Api } from '../helpers/api.ts';
import type { GithubStandIn } from './stand-in.ts';

/** A page the browser got: its status and HTML, and where it was sent on (a 302's Location). */
export type Page = { status: number; html: string; location: string | null };

/** What a browser does with one URL: one request, no redirect followed. */
export async function open(url: string, init: RequestInit = {}): Promise<Page> {
  const response = await fetch(url, { ...init, redirect: 'manual' });
  return { status: response.status, html: await response.text(), location: response.headers.get('location') };
}

/**
 * Opens the setup URL with `query` the way `login`'s browser does: through GitHub's OAuth
 * authorization when the server sends it there (the stand-in signs `login` in), back to the setup
 * URL with the code. Answers the last page: a confirmation to submit, or a refusal.
 */
export async function openSetup(serverUrl: string, github: GithubStandIn, login: string, query: Record<string, string>): Promise<Page> {
  let page = await open(`${serverUrl}/v1/integrations/github/setup?${new URLSearchParams(query)}`);
  for (let hops = 0; page.status === 302 && page.location && hops < 4; hops++) {
    const next = new URL(page.location);
    page = await open(next.origin === github.url ? github.asBrowserOf(login, next) : next.toString());
  }
  return page;
}

/** The hidden fields of a confirmation page's form. */
export function confirmationForm(page: Page): { attempt: string; confirm: string } {
  const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page.html)?.[1];
  const attempt = field('attempt');
  const confirm = field('confirm');
  if (!attempt || !confirm) throw new Error(`not a confirmation page: ${page.status} ${page.html}`);
  return { attempt, confirm };
}

/** Submits the confirmation form (with an API key when the page asked for one). */
export function confirmLink(serverUrl: string, form: Record<string, string>): Promise<Page> {
  return open(`${serverUrl}/console/github/link`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
}

/** Links `installationId` to the workspace the way a user does: install URL, GitHub's redirect to the setup URL, the confirmation. */
export async function linkThroughSetup(
  serverUrl: string,
  api: Api,
  github: GithubStandIn,
  installationId: number,
  login: string,
  name = 'acme',
): Promise<string> {
  const made = await api.post('/v1/integrations/github/install-url', { name });
  if (made.status !== 200) throw new Error(`install-url: ${made.status} ${JSON.stringify(made.body)}`);
  const page = await openSetup(serverUrl, github, login, {
    installation_id: String(installationId),
    setup_action: 'install',
    state: made.body.state,
    code: github.codeFor(login),
  });
  const linked = await confirmLink(serverUrl, confirmationForm(page));
  if (linked.status !== 200) throw new Error(`confirm: ${linked.status} ${linked.html}`);
  const links = (await api.get('/v1/integrations/github/install')).body as Array<{ id: string; installation_id: number }>;
  return links.find((l) => l.installation_id === installationId)!.id;
}
