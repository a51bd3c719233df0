import type { Api } from '../helpers/api.ts';
import type { GithubStandIn } from './stand-in.ts';

/** Links `installationId` to the workspace the way a user does: install URL, then GitHub's redirect to the setup URL. */
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
  const query = new URLSearchParams({ installation_id: String(installationId), setup_action: 'install', state: made.body.state, code: github.codeFor(login) });
  const page = await fetch(`${serverUrl}/v1/integrations/github/setup?${query}`);
  if (page.status !== 200) throw new Error(`setup: ${page.status} ${await page.text()}`);
  const links = (await api.get('/v1/integrations/github/install')).body as Array<{ id: string; installation_id: number }>;
  return links.find((l) => l.installation_id === installationId)!.id;
}
