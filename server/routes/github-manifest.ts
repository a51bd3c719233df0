import { DomainError } from '../domain/errors.ts';
import { APP_CREATED_PATH, type ManifestFlow, NEW_APP_PATH } from '../github/manifest-flow.ts';
import { manifestPageHeaders, newAppPage, postManifestPage } from '../github/manifest-pages.ts';
import { messagePage, SETUP_PAGE_HEADERS } from '../github/setup-pages.ts';
import type { RouteContext } from '../http/env.ts';
import { clientAddress } from '../http/node-request.ts';
import { page } from '../http/route.ts';

/**
 * The manifest pages (console pages, not API operations): the form, the manifest posted to
 * GitHub, and GitHub's redirect back with the code.
 */
export function githubManifestRoutes(ctx: RouteContext, flow: ManifestFlow, githubUrl: string): void {
  const headers = manifestPageHeaders(githubUrl);
  page(ctx, { method: 'get', path: NEW_APP_PATH, auth: 'none' }, (c) => c.html(newAppPage(), 200, headers));
  // The form carries the API key (a browser sends no key header): checked here, its refusal a page.
  page(ctx, { method: 'post', path: NEW_APP_PATH, auth: 'form-api-key' }, async (c) => {
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const text = (name: string) => (typeof form[name] === 'string' ? (form[name] as string).trim() : '');
    let organizationId: string;
    try {
      const principal = await ctx.services.auth.authenticate(text('api_key') || undefined, undefined, clientAddress(c));
      if (!principal.organizationScoped) return c.html(newAppPage('Creating the App needs an organization-scoped API key.'), 403, headers);
      organizationId = principal.organizationId;
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      return c.html(newAppPage(`That API key was not accepted (${error.message}).`), 401, headers);
    }
    const organization = text('github_organization');
    if (organization && !/^[A-Za-z0-9-]{1,39}$/.test(organization))
      return c.html(newAppPage('A GitHub organization name is letters, digits and hyphens.'), 400, headers);
    const name = text('app_name').slice(0, 34) || null;
    const { action } = await flow.start(organizationId, organization || null);
    return c.html(postManifestPage(action, flow.manifest(name)), 200, headers);
  });
  page(ctx, { method: 'get', path: APP_CREATED_PATH, auth: 'github-state' }, async (c) => {
    const outcome = await flow.complete({ code: c.req.query('code'), state: c.req.query('state') });
    if (outcome.kind === 'refused') return c.html(messagePage('The App was not stored', outcome.message), outcome.status, SETUP_PAGE_HEADERS);
    return c.html(
      messagePage(
        'GitHub App created',
        `GitHub made the App ${outcome.slug} (id ${outcome.appId}); its keys and secrets are stored encrypted. Restart the control plane to use it, then install it on your organization from its page on GitHub.`,
        outcome.installUrl,
        "The App's page on GitHub",
      ),
      200,
      SETUP_PAGE_HEADERS,
    );
  });
}
