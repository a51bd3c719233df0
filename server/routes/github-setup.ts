import { z } from 'zod';
import { lazySchema } from '../../shared/schemas/lazy.ts';
import { DomainError } from '../domain/errors.ts';
import type { InstallationLinks } from '../github/installation-links.ts';
import { confirmationPage, LINK_CONFIRM_PATH, messagePage, SETUP_PAGE_HEADERS } from '../github/setup-pages.ts';
import type { RouteContext } from '../http/env.ts';
import { clientAddress } from '../http/node-request.ts';
import { page, route } from '../http/route.ts';

/** Where the GitHub App's "Setup URL" points: GitHub sends the installer's browser here, with no API key. */
export const GITHUB_SETUP_PATH = '/v1/integrations/github/setup';

const InstallUrlRequest = lazySchema(() => z.strictObject({ name: z.string().min(1).max(255).optional() }));
const InstallUrl = lazySchema(() => z.object({ url: z.string(), state: z.string(), expires_at: z.string() }));

/** The setup-URL flow that proves who owns a GitHub App installation (contract §12). */
export function githubSetupRoutes(ctx: RouteContext, links: InstallationLinks): void {
  const tag = 'integrations';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v1/integrations/github/install-url',
      summary: "The GitHub App's install page with a signed, single-use, 15-minute state bound to the workspace",
      tag,
      body: InstallUrlRequest,
      // No body is allowed: the integration is then named after the GitHub account.
      bodyReading: { emptyBody: 'empty-object' },
      response: { status: 200, schema: InstallUrl },
    },
    async (c, { body }) => c.json(await links.installUrl(c.get('principal').workspaceId, body.name ?? null), 200, { 'cache-control': 'no-store' }),
  );
  route(
    ctx,
    {
      method: 'get',
      path: GITHUB_SETUP_PATH,
      summary: "The GitHub App's setup URL (and its OAuth callback): proves who installed the App, then asks them to confirm the link (HTML page; no API key)",
      tag,
      auth: 'github-state',
      query: z.object({
        installation_id: z.string().optional(),
        setup_action: z.string().optional(),
        state: z.string().optional(),
        code: z.string().optional(),
      }),
      response: {
        status: 200,
        schema: z.string(),
        contentType: 'text/html',
        description: 'HTML page: confirm the link (naming the workspace), or requested from an organization owner',
      },
      responses: [
        { status: 302, schema: null, description: "No code: to GitHub's OAuth authorization, which comes back here with one" },
        {
          status: 400,
          schema: z.string(),
          contentType: 'text/html',
          description: 'HTML page: unknown, used or expired state, or an installation the installer cannot see',
        },
        { status: 502, schema: z.string(), contentType: 'text/html', description: 'HTML page: GitHub could not be reached (with a link to try again)' },
      ],
      errors: [],
    },
    // Every field an optional string: the query always parses, and what it lacks is told on the page.
    async (c, { query }) => {
      const outcome = await links.complete(query);
      switch (outcome.kind) {
        case 'authorize':
          return c.redirect(outcome.url, 302);
        case 'confirm':
          return c.html(confirmationPage(outcome), 200, SETUP_PAGE_HEADERS);
        case 'requested':
          return c.html(
            messagePage(
              'Installation requested',
              'An owner of the GitHub organization must approve the installation. Once they do, GitHub brings them back here to link it.',
            ),
            200,
            SETUP_PAGE_HEADERS,
          );
        case 'refused':
          return c.html(messagePage('Nothing was linked', outcome.message, outcome.retryUrl), outcome.status, SETUP_PAGE_HEADERS);
      }
    },
  );
  // A console page, not an API operation: posted by the confirmation page's form.
  // Checked by the one-use attempt of the setup flow it confirms (and an API key the form may carry).
  page(ctx, { method: 'post', path: LINK_CONFIRM_PATH, auth: 'github-state' }, async (c) => {
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const text = (name: string) => (typeof form[name] === 'string' ? (form[name] as string) : undefined);
    let keyWorkspaceId: string | null = null;
    const apiKey = text('api_key');
    if (apiKey) {
      try {
        keyWorkspaceId = (await ctx.services.auth.authenticate(apiKey, undefined, clientAddress(c))).workspaceId;
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        return c.html(messagePage('Nothing was linked', `That API key was not accepted (${error.message}).`), 400, SETUP_PAGE_HEADERS);
      }
    }
    const outcome = await links.confirm({ attempt: text('attempt'), confirm: text('confirm') }, keyWorkspaceId);
    if (outcome.kind === 'refused') return c.html(messagePage('Nothing was linked', outcome.message), outcome.status, SETUP_PAGE_HEADERS);
    return c.html(
      messagePage(
        'GitHub installation linked',
        `The installation on ${outcome.account.login} is linked to the workspace ${outcome.target.workspace_name} as integration ${outcome.integration.id}. You can close this window.`,
      ),
      200,
      SETUP_PAGE_HEADERS,
    );
  });
}
