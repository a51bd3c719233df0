import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { streamSSE } from 'hono/streaming';
import type { ApiKeyCreated } from '../../shared/schemas/api-key.ts';
import { DeploymentListQuery } from '../../shared/schemas/deployment.ts';
import { GithubTrustCreate } from '../../shared/schemas/github-trust.ts';
import { RevisionListQuery } from '../../shared/schemas/revision.ts';
import { publicDeployment } from '../domain/deployments.ts';
import { BadRequest, NotFound, Unauthorized } from '../domain/errors.ts';
import { publicRevision } from '../domain/revisions.ts';
import { errorResponse } from '../http/errors.ts';
import { clientAddress } from '../http/node-request.ts';
import type { LiveSubject } from '../store/console.ts';
import { CONSOLE_CSS, CONSOLE_JS } from './assets.ts';
import type { ConsoleDeps } from './console.ts';
import type { Html } from './html.ts';
import { deploymentPage } from './pages/deployment.ts';
import { type DeploymentRow, deploymentsPage } from './pages/deployments.ts';
import type { Frame } from './pages/layout.ts';
import { revisionPage } from './pages/revision.ts';
import { confirmPage, errorPage, signInPage, workspacesPage } from './pages/sign-in.ts';
import { apiKeysPage, integrationsPage, listenersPage, trustPage } from './pages/workspace-settings.ts';
import type { ConsoleClient, ConsoleSession } from './sessions.ts';

type ConsoleEnv = { Variables: { session: ConsoleSession | null } };
type C = Context<ConsoleEnv>;

const SESSION_COOKIE = 'console_session';
/** The sign-in form's own CSRF token (no session yet): a random value in a cookie and in the form. */
const SIGN_IN_COOKIE = 'console_sign_in';
const PAGE_SIZE = 20;
const LOG_LINES = 1000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Notices a redirect may ask a page to show (by name, so a link cannot put words on the page). */
const NOTICES: Record<string, string> = {
  redeploy: 'Redeploy started: a new revision is on its way.',
  rollback: 'Roll back started: a new revision with the earlier configuration is on its way.',
  interrupt: 'Interrupt requested.',
  deleted: 'The deployment is being deleted.',
  revoked: 'The key was revoked.',
  trusted: 'The trust entry was added.',
  untrusted: 'The trust entry was removed.',
};

/**
 * Headers of every console answer: pages carry workspace data (and once, a new key), so nothing is
 * cached; no other origin may frame them or post to them; only our own script and styles run.
 */
const SECURITY_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

/** The console's routes, as one Hono app mounted at `/console`. */
export function consoleRoutes(deps: ConsoleDeps): Hono<ConsoleEnv> {
  const { services, sessions, hub } = deps;
  const app = new Hono<ConsoleEnv>();

  app.onError(async (error, c) => {
    // The API's one error mapping decides the status and the sentence; the console shows them as a page.
    const answer = errorResponse(error, c, services);
    const body = (await answer.json()) as { detail: unknown; request_id?: string };
    const detail = typeof body.detail === 'string' ? body.detail : 'The form was not filled in as expected.';
    const session = c.get('session') ?? null;
    const frame = session ? await frameOf(session).catch(() => undefined) : undefined;
    return htmlAnswer(
      c,
      errorPage({ status: answer.status, detail: body.request_id ? `${detail} (request id ${body.request_id})` : detail, frame }),
      answer.status,
    );
  });

  app.use(
    '*',
    own(async (c, next) => {
      await next();
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value);
    }),
  );
  // Forms are small; anything larger is refused before it is read.
  app.use('*', own(bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.text('Form too large.', 413) })));
  app.use(
    '*',
    own(async (c, next) => {
      c.set('session', await sessions.resolve(getCookie(c, SESSION_COOKIE)));
      if (c.req.method !== 'POST') return next();
      // A browser names the page a form was sent from; one from another site is refused outright.
      if (!sameOrigin(c.req.header('origin'), c.req.header('host'))) return refuse(c, 'This form was sent from another site.');
      if (c.req.path === '/console/sign-in') return next();
      const session = c.get('session');
      if (!session) return c.redirect('/console/sign-in', 303);
      const form = await c.req.parseBody();
      if (!sessions.csrfMatches(session, typeof form.csrf === 'string' ? form.csrf : undefined)) {
        return refuse(c, 'This form has no valid CSRF token (it is out of date or was not sent from this console). Reload the page and try again.');
      }
      return next();
    }),
  );

  /** The session of a page, or a redirect to sign in (and back here afterwards). */
  const signedIn =
    (render: (c: C, session: ConsoleSession) => Promise<Response>) =>
    async (c: C): Promise<Response> => {
      const session = c.get('session');
      if (!session) {
        const back = c.req.method === 'GET' ? `?next=${encodeURIComponent(c.req.path)}` : '';
        return c.redirect(`/console/sign-in${back}`, 303);
      }
      return render(c, session);
    };

  async function frameOf(session: ConsoleSession): Promise<Frame> {
    const workspaces = await services.auth.listWorkspaces(session.principal);
    const name = workspaces.find((workspace) => workspace.id === session.principal.workspaceId)?.name ?? session.principal.workspaceId;
    return { csrf: sessions.csrfToken(session), workspaceName: name, organizationScoped: session.principal.organizationScoped };
  }

  /** The address of a page's change stream, carrying what the page showed (its fingerprint). */
  async function liveUrl(subject: LiveSubject): Promise<string> {
    const query = new URLSearchParams({ since: await hub.fingerprint(subject) });
    if (subject.kind === 'deployments') query.set('deployment_ids', subject.deploymentIds.join(','));
    else query.set('deployment_id', subject.deploymentId);
    if (subject.kind === 'revision') query.set('revision_id', subject.revisionId);
    return `/console/live?${query}`;
  }

  app.get('/assets/console.css', (c) => c.body(CONSOLE_CSS, 200, { 'content-type': 'text/css; charset=utf-8' }));
  app.get('/assets/console.js', (c) => c.body(CONSOLE_JS, 200, { 'content-type': 'text/javascript; charset=utf-8' }));

  app.get('/sign-in', (c) => {
    if (c.get('session')) return c.redirect('/console', 303);
    return signInForm(c, undefined, 200, c.req.query('next'));
  });

  app.post('/sign-in', async (c) => {
    const form = await c.req.parseBody();
    const expected = getCookie(c, SIGN_IN_COOKIE);
    const next = consolePath(form.next);
    if (!expected || form.csrf !== expected) return signInForm(c, 'The sign-in form was out of date. Please try again.', 403, next);
    const key = typeof form.key === 'string' ? form.key.trim() : '';
    if (!key) return signInForm(c, 'Enter an API key.', 400, next);
    let session: ConsoleSession;
    try {
      session = await sessions.signIn(key, consoleClient(c));
    } catch (error) {
      if (error instanceof Unauthorized) return signInForm(c, 'That API key is not valid (wrong, revoked or expired).', 401, next);
      throw error;
    }
    deleteCookie(c, SIGN_IN_COOKIE, { path: '/console' });
    setCookie(c, SESSION_COOKIE, session.token, {
      path: '/',
      httpOnly: true,
      sameSite: 'Strict',
      secure: deps.secureCookies(c.req.url),
      expires: new Date(session.expiresAt),
    });
    if (!next && session.principal.organizationScoped && (await services.auth.listWorkspaces(session.principal)).length > 1) {
      return c.redirect('/console/workspaces', 303);
    }
    return c.redirect(next ?? '/console', 303);
  });

  function signInForm(c: C, error: string | undefined, statusCode: 200 | 400 | 401 | 403, next: unknown): Response {
    const token = crypto.randomUUID();
    setCookie(c, SIGN_IN_COOKIE, token, { path: '/console', httpOnly: true, sameSite: 'Strict', secure: deps.secureCookies(c.req.url), maxAge: 3600 });
    return htmlAnswer(c, signInPage({ csrf: token, error, next: consolePath(next) }), statusCode);
  }

  app.post('/sign-out', async (c) => {
    const session = c.get('session');
    if (session) await sessions.signOut(session, consoleClient(c));
    deleteCookie(c, SESSION_COOKIE, { path: '/', secure: deps.secureCookies(c.req.url) });
    return c.redirect('/console/sign-in', 303);
  });

  app.get(
    '/workspaces',
    signedIn(async (c, session) => {
      const workspaces = await services.auth.listWorkspaces(session.principal);
      return htmlAnswer(c, workspacesPage({ frame: await frameOf(session), workspaces, current: session.principal.workspaceId }));
    }),
  );

  app.post(
    '/workspaces',
    signedIn(async (c, session) => {
      const form = await c.req.parseBody();
      await sessions.chooseWorkspace(session, uuidField(form.workspace_id, 'workspace_id'));
      return c.redirect('/console', 303);
    }),
  );

  app.get(
    '/',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const query = DeploymentListQuery.parse({ limit: PAGE_SIZE + 1, offset: offsetParam(c), name_contains: c.req.query('name_contains') || undefined });
      const listed = await services.deployments.list(tenantId, query);
      const shown = listed.resources.slice(0, PAGE_SIZE);
      const rows: DeploymentRow[] = await Promise.all(
        shown.map(async (record) => {
          const deployment = publicDeployment(record);
          const [active, latest] = await Promise.all([
            revisionOrNull(tenantId, deployment.id, deployment.active_revision_id),
            deployment.latest_revision_id === deployment.active_revision_id ? null : revisionOrNull(tenantId, deployment.id, deployment.latest_revision_id),
          ]);
          return { deployment, active, latest: latest ?? active };
        }),
      );
      return htmlAnswer(
        c,
        deploymentsPage({
          frame: await frameOf(session),
          live: await liveUrl({ kind: 'deployments', tenantId, deploymentIds: shown.map((record) => record.id) }),
          rows,
          nameContains: query.name_contains,
          offset: query.offset,
          limit: PAGE_SIZE,
          more: listed.resources.length > PAGE_SIZE,
          notice: NOTICES[c.req.query('done') ?? ''],
        }),
      );
    }),
  );

  async function revisionOrNull(tenantId: string, deploymentId: string, revisionId: string | null) {
    if (!revisionId) return null;
    const found = await services.revisions.find(tenantId, deploymentId, revisionId);
    return found ? publicRevision(found) : null;
  }

  app.get(
    '/deployments/:deployment_id',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const deploymentId = uuidParam(c, 'deployment_id');
      const deployment = publicDeployment(await services.deployments.get(tenantId, deploymentId));
      const query = RevisionListQuery.parse({ limit: PAGE_SIZE + 1, offset: offsetParam(c) });
      const listed = await services.revisions.list(tenantId, deploymentId, query);
      return htmlAnswer(
        c,
        deploymentPage({
          frame: await frameOf(session),
          live: await liveUrl({ kind: 'deployment', tenantId, deploymentId }),
          deployment,
          revisions: listed.resources.slice(0, PAGE_SIZE).map(publicRevision),
          offset: query.offset,
          limit: PAGE_SIZE,
          more: listed.resources.length > PAGE_SIZE,
          githubWebUrl: deps.githubWebUrl,
          notice: NOTICES[c.req.query('done') ?? ''],
        }),
      );
    }),
  );

  app.get(
    '/deployments/:deployment_id/revisions/:revision_id',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const deploymentId = uuidParam(c, 'deployment_id');
      const revisionId = uuidParam(c, 'revision_id');
      const deployment = publicDeployment(await services.deployments.get(tenantId, deploymentId));
      const revision = publicRevision(await services.revisions.get(tenantId, deploymentId, revisionId));
      // Each log from its cursor (`build_from`, `deploy_from`: the API's `next_offset`), a page of lines at a time.
      const buildFrom = cursorParam(c, 'build_from');
      const deployFrom = cursorParam(c, 'deploy_from');
      const [build, deploy] = await Promise.all([
        services.revisions.logs(tenantId, deploymentId, revisionId, { type: 'build', offset: buildFrom, limit: LOG_LINES }),
        services.revisions.logs(tenantId, deploymentId, revisionId, { type: 'deploy', offset: deployFrom, limit: LOG_LINES }),
      ]);
      const logPage = (from: number, answer: { logs: unknown[]; next_offset: number | null }) => ({
        from,
        next: answer.logs.length === LOG_LINES ? answer.next_offset : null,
      });
      return htmlAnswer(
        c,
        revisionPage({
          frame: await frameOf(session),
          live: await liveUrl({ kind: 'revision', tenantId, deploymentId, revisionId }),
          deployment,
          revision,
          build: { lines: build.logs, ...logPage(buildFrom, build) },
          deploy: { lines: deploy.logs, ...logPage(deployFrom, deploy) },
          githubWebUrl: deps.githubWebUrl,
        }),
      );
    }),
  );

  /**
   * An action on a deployment: GET asks for confirmation (a page, so it works without script),
   * POST (from that page, with its CSRF token) does it and goes back to the deployment.
   */
  function action(input: {
    path: string;
    title: string;
    question: (name: string) => string;
    button: string;
    danger?: boolean;
    run: (session: ConsoleSession, deploymentId: string, revisionId: string | undefined) => Promise<void>;
    done: (deploymentId: string) => string;
  }) {
    const ids = (c: C) => ({
      deploymentId: uuidParam(c, 'deployment_id'),
      revisionId: c.req.param('revision_id') === undefined ? undefined : uuidParam(c, 'revision_id'),
    });
    app.get(
      input.path,
      signedIn(async (c, session) => {
        const { deploymentId } = ids(c);
        const deployment = await services.deployments.get(session.principal.workspaceId, deploymentId);
        const back = `/console${c.req.path.replace(/^\/console/, '').replace(/\/[a-z-]+$/, '')}`;
        return htmlAnswer(
          c,
          confirmPage({
            frame: await frameOf(session),
            title: input.title,
            question: input.question(deployment.name),
            action: c.req.path,
            button: input.button,
            back,
            danger: input.danger,
          }),
        );
      }),
    );
    app.post(
      input.path,
      signedIn(async (c, session) => {
        const { deploymentId, revisionId } = ids(c);
        await input.run(session, deploymentId, revisionId);
        return c.redirect(input.done(deploymentId), 303);
      }),
    );
  }

  action({
    path: '/deployments/:deployment_id/redeploy',
    title: 'Redeploy',
    question: (name) => `Build and deploy ${name} again from its current configuration?`,
    button: 'Redeploy',
    run: async (session, deploymentId) => {
      await services.deployments.createRevision(session.principal.workspaceId, deploymentId, {});
    },
    done: (id) => `/console/deployments/${id}?done=redeploy`,
  });

  action({
    path: '/deployments/:deployment_id/delete',
    title: 'Delete deployment',
    question: (name) => `Delete ${name}? Its revisions stop and it is removed once torn down. This cannot be undone.`,
    button: 'Delete',
    danger: true,
    run: (session, deploymentId) => services.deployments.delete(session.principal.workspaceId, deploymentId, false),
    done: () => '/console?done=deleted',
  });

  action({
    path: '/deployments/:deployment_id/revisions/:revision_id/rollback',
    title: 'Roll back',
    question: (name) => `Deploy this earlier revision of ${name} again (a new revision with its configuration and secrets)?`,
    button: 'Roll back',
    run: async (session, deploymentId, revisionId) => {
      const tenantId = session.principal.workspaceId;
      const revision = await services.revisions.get(tenantId, deploymentId, revisionId!);
      if (revision.status !== 'DEPLOYED') throw new BadRequest(`Only a revision that was DEPLOYED can be rolled back to; this one is ${revision.status}.`);
      await services.deployments.redeploy(tenantId, deploymentId, revisionId!);
    },
    done: (id) => `/console/deployments/${id}?done=rollback`,
  });

  action({
    path: '/deployments/:deployment_id/revisions/:revision_id/interrupt',
    title: 'Interrupt',
    question: (name) => `Interrupt this revision of ${name}? What it has not done yet is not done.`,
    button: 'Interrupt',
    danger: true,
    run: async (session, deploymentId, revisionId) => {
      const tenantId = session.principal.workspaceId;
      await services.revisions.get(tenantId, deploymentId, revisionId!);
      await services.pipeline.interrupt(tenantId, deploymentId, revisionId!);
    },
    done: (id) => `/console/deployments/${id}?done=interrupt`,
  });

  app.get(
    '/live',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const deploymentId = c.req.query('deployment_id');
      const revisionId = c.req.query('revision_id');
      // The deployments a list page shows (at most a page of them).
      const shownIds = (c.req.query('deployment_ids') ?? '').split(',').filter((id) => id !== '');
      const malformed =
        (deploymentId && !UUID.test(deploymentId)) ||
        (revisionId && (!UUID.test(revisionId) || !deploymentId)) ||
        shownIds.length > PAGE_SIZE ||
        shownIds.some((id) => !UUID.test(id));
      if (malformed) throw new NotFound('No such page to watch.');
      const subject: LiveSubject = revisionId
        ? { kind: 'revision', tenantId, deploymentId: deploymentId!, revisionId: revisionId.toLowerCase() }
        : deploymentId
          ? { kind: 'deployment', tenantId, deploymentId: deploymentId.toLowerCase() }
          : { kind: 'deployments', tenantId, deploymentIds: shownIds.map((id) => id.toLowerCase()) };
      const since = c.req.query('since') ?? '';
      const current = await hub.fingerprint(subject);
      return streamSSE(c, async (stream) => {
        let end: () => void = () => {};
        const ended = new Promise<void>((resolve) => (end = resolve));
        const changed = () => void stream.writeSSE({ event: 'changed', data: '' }).catch(end);
        const unwatch = hub.watch(subject, current, changed);
        // Proxies drop idle streams; a comment line now and then keeps it open. The session's end ends it.
        const keepAlive = setInterval(() => {
          if (Date.now() >= Date.parse(session.expiresAt)) end();
          else void stream.write(': keep-alive\n\n').catch(end);
        }, 25_000);
        stream.onAbort(end);
        if (since !== current) changed();
        await ended;
        clearInterval(keepAlive);
        unwatch();
      });
    }),
  );

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
    signedIn((c, session) => trustEntriesPage(c, session, { notice: NOTICES[c.req.query('done') ?? ''] })),
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

  app.get(
    '/trust/:trust_id/remove',
    signedIn(async (c, session) =>
      htmlAnswer(
        c,
        confirmPage({
          frame: await frameOf(session),
          title: 'Remove trust entry',
          question: 'Remove this trust entry? Workflows of its repository can no longer exchange their tokens for keys of this workspace.',
          action: c.req.path,
          button: 'Remove',
          back: '/console/trust',
          danger: true,
        }),
      ),
    ),
  );

  app.post(
    '/trust/:trust_id/remove',
    signedIn(async (c, session) => {
      await deps.trust.remove(session.principal, session.principal.workspaceId, uuidParam(c, 'trust_id'));
      return c.redirect('/console/trust?done=untrusted', 303);
    }),
  );

  async function keysPage(c: C, session: ConsoleSession, extra: { created?: ApiKeyCreated; notice?: string } = {}): Promise<Response> {
    const keys = await services.auth.listApiKeys(session.principal);
    return htmlAnswer(c, apiKeysPage({ frame: await frameOf(session), keys, currentKeyId: session.principal.keyId, ...extra }));
  }

  app.get(
    '/api-keys',
    signedIn((c, session) => keysPage(c, session, { notice: NOTICES[c.req.query('done') ?? ''] })),
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

  app.get(
    '/api-keys/:key_id/revoke',
    signedIn(async (c, session) => {
      const keyId = uuidParam(c, 'key_id');
      const own = keyId === session.principal.keyId;
      return htmlAnswer(
        c,
        confirmPage({
          frame: await frameOf(session),
          title: 'Revoke key',
          question: own
            ? 'Revoke the key this session was signed in with? This also signs you out.'
            : 'Revoke this key? Anything using it stops working at once.',
          action: c.req.path,
          button: 'Revoke',
          back: '/console/api-keys',
          danger: true,
        }),
      );
    }),
  );

  app.post(
    '/api-keys/:key_id/revoke',
    signedIn(async (c, session) => {
      await services.auth.revokeApiKey(session.principal, uuidParam(c, 'key_id'));
      return c.redirect('/console/api-keys?done=revoked', 303);
    }),
  );

  // Anything else under /console is a page that does not exist: said as a page, not as JSON.
  app.all(
    '*',
    own(() => {
      throw new NotFound('There is no such page in the console.');
    }),
  );

  return app;
}

/**
 * `/console/github/*` belongs to the GitHub App's pages, another module with its own routes and
 * checks: this module's middleware and its not-found page leave those paths alone.
 */
const OTHER_MODULES = /^\/console\/github(\/|$)/;

function own(handler: MiddlewareHandler<ConsoleEnv>): MiddlewareHandler<ConsoleEnv> {
  return (c, next) => (OTHER_MODULES.test(c.req.path) ? next() : handler(c, next));
}

function htmlAnswer(c: Context, body: Html, statusCode = 200): Response {
  return c.html(body, statusCode as 200);
}

function refuse(c: Context, detail: string): Response {
  return c.html(errorPage({ status: 403, detail }), 403);
}

/** Whether a form's `Origin` (when the browser sent one) is this server; a malformed one is not. */
function sameOrigin(origin: string | undefined, host: string | undefined): boolean {
  if (!origin || origin === 'null') return true;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** Where to go after signing in: a console page only (never another site). */
function consolePath(value: unknown): string | undefined {
  return typeof value === 'string' && /^\/console(\/[\w/-]*)?$/.test(value) ? value : undefined;
}

/** A log cursor from the query (0, the start, when absent or not a cursor). */
function cursorParam(c: Context, name: string): number {
  const raw = c.req.query(name);
  const cursor = raw === undefined ? 0 : Number(raw);
  return Number.isSafeInteger(cursor) && cursor >= 0 ? cursor : 0;
}

function offsetParam(c: Context): number {
  const raw = c.req.query('offset');
  const offset = raw === undefined ? 0 : Number(raw);
  return Number.isSafeInteger(offset) && offset >= 0 ? offset : 0;
}

/** A path id; anything but a UUID is a page that does not exist (as the API's 404, never a 500). */
function uuidParam(c: Context, name: string): string {
  const value = c.req.param(name) ?? '';
  if (!UUID.test(value)) throw new NotFound(`No such ${name.replace('_id', '')}: ${value.slice(0, 64)}.`);
  return value.toLowerCase();
}

function uuidField(value: unknown, name: string): string {
  if (typeof value !== 'string' || !UUID.test(value)) throw new BadRequest(`${name} must be a workspace id.`);
  return value.toLowerCase();
}

/** Where a browser's sign-in or sign-out comes from, for the audit log. */
function consoleClient(c: Context): ConsoleClient {
  return { address: clientAddress(c), userAgent: c.req.header('user-agent') };
}
