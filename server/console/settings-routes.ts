import type { ApiKeyCreated } from '../../shared/schemas/api-key.ts';
import { GithubTrustCreate } from '../../shared/schemas/github-trust.ts';
import { apiKeysPage, integrationsPage, listenersPage, trustPage } from './pages/workspace-settings.ts';
import { type C, type ConsolePages, htmlAnswer, noticeOf, uuidParam } from './route-kit.ts';
import type { ConsoleSession } from './sessions.ts';

/** The workspace's settings: listeners, integrations, keyless trust entries and API keys. */
export function settingsRoutes(pages: ConsolePages): void {
  const { app, deps, signedIn, frameOf, confirmed } = pages;
  const { services } = deps;

  app.get(
    '/listeners',
    signedIn(async (c, session) => {
      const listed = await services.listeners.list(session.principal.workspaceId, 100, 0);
      return htmlAnswer(
        c,
        listenersPage({ frame: await frameOf(session), listeners: listed.resources, now: services.clock.now(), healthyWithinMs: deps.listenerHealthyWithinMs }),
      );
    }),
  );

  app.get(
    '/integrations',
    signedIn(async (c, session) => {
      const integrations = await services.integrations.list(session.principal.workspaceId);
      return htmlAnswer(c, integrationsPage({ frame: await frameOf(session), integrations }));
    }),
  );

  async function trustEntriesPage(c: C, session: ConsoleSession, extra: { error?: string; notice?: string } = {}): Promise<Response> {
    const entries = await deps.trust.list(session.principal, session.principal.workspaceId);
    return htmlAnswer(c, trustPage({ frame: await frameOf(session), entries, ...extra }), extra.error ? 400 : 200);
  }

  app.get(
    '/trust',
    signedIn((c, session) => trustEntriesPage(c, session, { notice: noticeOf(c) })),
  );

  app.post(
    '/trust',
    signedIn(async (c, session) => {
      const form = await c.req.parseBody();
      const text = (name: string) => (typeof form[name] === 'string' && form[name].trim() !== '' ? form[name].trim() : undefined);
      const number = (name: string) => (text(name) === undefined ? undefined : Number(text(name)));
      // The API's own schema decides what an entry may be; its first complaint is shown on the page.
      const parsed = GithubTrustCreate.safeParse({
        repository_id: number('repository_id'),
        repository_owner_id: number('repository_owner_id'),
        ref: text('ref'),
        environment: text('environment'),
        job_workflow_ref: text('job_workflow_ref'),
        description: text('description'),
      });
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        return trustEntriesPage(c, session, { error: `${issue.path.join('.') || 'entry'}: ${issue.message}` });
      }
      await deps.trust.create(session.principal, session.principal.workspaceId, parsed.data);
      return c.redirect('/console/trust?done=trusted', 303);
    }),
  );

  confirmed({
    path: '/trust/:trust_id/remove',
    title: 'Remove trust entry',
    question: () => 'Remove this trust entry? Workflows of its repository can no longer exchange their tokens for keys of this workspace.',
    button: 'Remove',
    danger: true,
    back: () => '/console/trust',
    run: (c, session) => deps.trust.remove(session.principal, session.principal.workspaceId, uuidParam(c, 'trust_id')),
    done: () => '/console/trust?done=untrusted',
  });

  async function keysPage(c: C, session: ConsoleSession, extra: { created?: ApiKeyCreated; notice?: string } = {}): Promise<Response> {
    const keys = await services.auth.listApiKeys(session.principal);
    return htmlAnswer(c, apiKeysPage({ frame: await frameOf(session), keys, currentKeyId: session.principal.keyId, ...extra }));
  }

  app.get(
    '/api-keys',
    signedIn((c, session) => keysPage(c, session, { notice: noticeOf(c) })),
  );

  app.post(
    '/api-keys',
    signedIn(async (c, session) => {
      const form = await c.req.parseBody();
      const description = typeof form.description === 'string' && form.description.trim() ? form.description.trim().slice(0, 500) : null;
      const workspaceId = form.scope === 'organization' ? null : session.principal.workspaceId;
      const created = await services.auth.createApiKey(session.principal, { workspace_id: workspaceId, description });
      // The one answer that shows the key: rendered here, not behind a redirect, and never cached (no-store).
      return keysPage(c, session, { created });
    }),
  );

  confirmed({
    path: '/api-keys/:key_id/revoke',
    title: 'Revoke key',
    question: (c, session) =>
      uuidParam(c, 'key_id') === session.principal.keyId
        ? 'Revoke the key this session was signed in with? This also signs you out.'
        : 'Revoke this key? Anything using it stops working at once.',
    button: 'Revoke',
    danger: true,
    back: () => '/console/api-keys',
    run: (c, session) => services.auth.revokeApiKey(session.principal, uuidParam(c, 'key_id')),
    done: () => '/console/api-keys?done=revoked',
  });
}
