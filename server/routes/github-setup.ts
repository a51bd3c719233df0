import { z } from 'zod';
import type { InstallationLinks, SetupOutcome } from '../github/installation-links.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { readJson } from '../http/validation.ts';
import { CALLBACK_PAGE_HEADERS, callbackPage } from './oauth-page.ts';

/** Where the GitHub App's "Setup URL" points: GitHub sends the installer's browser here, with no API key. */
export const GITHUB_SETUP_PATH = '/v1/integrations/github/setup';

const InstallUrlRequest = z.strictObject({ name: z.string().min(1).max(255).optional() });
const InstallUrl = z.object({ url: z.string(), state: z.string(), expires_at: z.string() });

/** The setup-URL flow that proves who owns a GitHub App installation (contract §12). */
export function githubSetupRoutes(ctx: RouteContext, links: InstallationLinks): void {
  const tag = 'integrations';
  route(
    ctx,
    {
      method: 'post',
      path: '/v1/integrations/github/install-url',
      summary: "The GitHub App's install page with a signed, single-use, 15-minute state bound to the workspace",
      tag,
      body: InstallUrlRequest,
      response: { status: 200, schema: InstallUrl },
    },
    async (c) => {
      // An empty body is allowed: the integration is then named after the GitHub account.
      const body = c.req.header('content-length') === '0' || !c.req.header('content-type') ? {} : await readJson(c, InstallUrlRequest);
      return c.json(await links.installUrl(c.get('principal').workspaceId, body.name ?? null), 200, { 'cache-control': 'no-store' });
    },
  );
  const describe = (outcome: SetupOutcome): { status: 200 | 400 | 502; title: string; message: string } => {
    switch (outcome.kind) {
      case 'linked':
        return {
          status: 200,
          title: 'GitHub installation linked',
          message: `The installation on ${outcome.account.login} is linked as integration ${outcome.integration.id}. You can close this window.`,
        };
      case 'requested':
        return {
          status: 200,
          title: 'Installation requested',
          message: 'An owner of the GitHub organization must approve the installation; link it again from a new install URL once they have.',
        };
      case 'refused':
        return { status: outcome.status, title: 'Nothing was linked', message: outcome.message };
    }
  };
  route(
    ctx,
    {
      method: 'get',
      path: GITHUB_SETUP_PATH,
      summary: "The GitHub App's setup URL: links the installation once the state and the installer's authorization prove it (HTML page; no API key)",
      tag,
      auth: false,
      query: z.object({
        installation_id: z.string().optional(),
        setup_action: z.string().optional(),
        state: z.string().optional(),
        code: z.string().optional(),
      }),
      response: { status: 200, schema: z.string(), contentType: 'text/html', description: 'HTML page: linked, or requested from an organization owner' },
      responses: [
        {
          status: 400,
          schema: z.string(),
          contentType: 'text/html',
          description: 'HTML page: unknown, used or expired state, no code, or an installation the installer cannot see',
        },
        { status: 502, schema: z.string(), contentType: 'text/html', description: 'HTML page: GitHub could not be reached' },
      ],
      errors: [],
    },
    async (c) => {
      const { status, title, message } = describe(
        await links.complete({
          installation_id: c.req.query('installation_id'),
          setup_action: c.req.query('setup_action'),
          state: c.req.query('state'),
          code: c.req.query('code'),
        }),
      );
      return c.html(callbackPage(title, message), status, CALLBACK_PAGE_HEADERS);
    },
  );
}
