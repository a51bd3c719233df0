import type { Context, Hono, MiddlewareHandler } from 'hono';
import { BadRequest, NotFound } from '../domain/errors.ts';
import { clientAddress } from '../http/node-request.ts';
import type { LiveSubject } from '../store/console.ts';
import type { ConsoleDeps } from './console.ts';
import type { Html } from './html.ts';
import type { Frame } from './pages/layout.ts';
import { confirmPage, errorPage } from './pages/sign-in.ts';
import type { ConsoleClient, ConsoleSession } from './sessions.ts';

/** What the console's routes share: its Hono app (its session in each request), and the helpers every page uses. */
export type ConsoleEnv = { Variables: { session: ConsoleSession | null } };
export type C = Context<ConsoleEnv>;

export const SESSION_COOKIE = 'console_session';
export const PAGE_SIZE = 20;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
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

/** The notice a redirect asked the page to show (`?done=`), if it is one the console knows. */
export function noticeOf(c: Context): string | undefined {
  return NOTICES[c.req.query('done') ?? ''];
}

/** A group of console pages: the app they are registered on, and the helpers of a signed-in page. */
export type ConsolePages = {
  app: Hono<ConsoleEnv>;
  deps: ConsoleDeps;
  /** The session of a page, or a redirect to sign in (and back here afterwards). */
  signedIn: (render: (c: C, session: ConsoleSession) => Promise<Response>) => (c: C) => Promise<Response>;
  /** What every signed-in page shows around its content. */
  frameOf: (session: ConsoleSession) => Promise<Frame>;
  /** The address of a page's change stream, carrying what the page showed (its fingerprint). */
  liveUrl: (subject: LiveSubject) => Promise<string>;
  /**
   * An action that asks first: GET `path` is a page asking `question` (so it works without
   * script), POST `path` (from that page, with its CSRF token) runs it and goes to `done`.
   */
  confirmed: (action: ConfirmedAction) => void;
};

export type ConfirmedAction = {
  path: string;
  title: string;
  question: (c: C, session: ConsoleSession) => string | Promise<string>;
  button: string;
  danger?: boolean;
  /** Where the page's "back" goes. */
  back: (c: C) => string;
  run: (c: C, session: ConsoleSession) => Promise<void>;
  /** Where to go once done. */
  done: (c: C) => string;
};

export function consolePages(app: Hono<ConsoleEnv>, deps: ConsoleDeps): ConsolePages {
  const { services, sessions, hub } = deps;
  const signedIn: ConsolePages['signedIn'] = (render) => async (c) => {
    const session = c.get('session');
    if (!session) {
      const back = c.req.method === 'GET' ? `?next=${encodeURIComponent(c.req.path)}` : '';
      return c.redirect(`/console/sign-in${back}`, 303);
    }
    return render(c, session);
  };
  const frameOf: ConsolePages['frameOf'] = async (session) => {
    const workspaces = await services.auth.listWorkspaces(session.principal);
    const name = workspaces.find((workspace) => workspace.id === session.principal.workspaceId)?.name ?? session.principal.workspaceId;
    return { csrf: sessions.csrfToken(session), workspaceName: name, organizationScoped: session.principal.organizationScoped };
  };
  return {
    app,
    deps,
    signedIn,
    frameOf,
    confirmed: (action) => {
      app.get(
        action.path,
        signedIn(async (c, session) =>
          htmlAnswer(
            c,
            confirmPage({
              frame: await frameOf(session),
              title: action.title,
              question: await action.question(c, session),
              action: c.req.path,
              button: action.button,
              back: action.back(c),
              danger: action.danger,
            }),
          ),
        ),
      );
      app.post(
        action.path,
        signedIn(async (c, session) => {
          await action.run(c, session);
          return c.redirect(action.done(c), 303);
        }),
      );
    },
    liveUrl: async (subject) => {
      const query = new URLSearchParams({ since: await hub.fingerprint(subject) });
      if (subject.kind === 'deployments') query.set('deployment_ids', subject.deploymentIds.join(','));
      else query.set('deployment_id', subject.deploymentId);
      if (subject.kind === 'revision') query.set('revision_id', subject.revisionId);
      return `/console/live?${query}`;
    },
  };
}

/**
 * `/console/github/*` belongs to the GitHub App's pages, another module with its own routes and
 * checks: this module's middleware and its not-found page leave those paths alone.
 */
const OTHER_MODULES = /^\/console\/github(\/|$)/;

export function own(handler: MiddlewareHandler<ConsoleEnv>): MiddlewareHandler<ConsoleEnv> {
  return (c, next) => (OTHER_MODULES.test(c.req.path) ? next() : handler(c, next));
}

export function htmlAnswer(c: Context, body: Html, statusCode = 200): Response {
  return c.html(body, statusCode as 200);
}

export function refuse(c: Context, detail: string): Response {
  return c.html(errorPage({ status: 403, detail }), 403);
}

/** Whether a form's `Origin` (when the browser sent one) is this server; a malformed one is not. */
export function sameOrigin(origin: string | undefined, host: string | undefined): boolean {
  if (!origin || origin === 'null') return true;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** Where to go after signing in: a console page only (never another site). */
export function consolePath(value: unknown): string | undefined {
  return typeof value === 'string' && /^\/console(\/[\w/-]*)?$/.test(value) ? value : undefined;
}

/** A cursor or offset from the query (0, the start, when absent or not one). */
export function cursorParam(c: Context, name: string): number {
  const raw = c.req.query(name);
  const cursor = raw === undefined ? 0 : Number(raw);
  return Number.isSafeInteger(cursor) && cursor >= 0 ? cursor : 0;
}

/** A page's offset in a list (0 when absent or not one). */
export function offsetParam(c: Context): number {
  return cursorParam(c, 'offset');
}

/** A path id; anything but a UUID is a page that does not exist (as the API's 404, never a 500). */
export function uuidParam(c: Context, name: string): string {
  const value = c.req.param(name) ?? '';
  if (!UUID.test(value)) throw new NotFound(`No such ${name.replace('_id', '')}: ${value.slice(0, 64)}.`);
  return value.toLowerCase();
}

export function uuidField(value: unknown, name: string): string {
  if (typeof value !== 'string' || !UUID.test(value)) throw new BadRequest(`${name} must be a workspace id.`);
  return value.toLowerCase();
}

/** Where a browser's sign-in or sign-out comes from, for the audit log. */
export function consoleClient(c: Context): ConsoleClient {
  return { address: clientAddress(c), userAgent: c.req.header('user-agent') };
}
