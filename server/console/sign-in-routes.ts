import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { Unauthorized } from '../domain/errors.ts';
import { signInPage, workspacesPage } from './pages/sign-in.ts';
import { type C, type ConsolePages, consoleClient, consolePath, htmlAnswer, SESSION_COOKIE, uuidField } from './route-kit.ts';
import type { ConsoleSession } from './sessions.ts';

/** The sign-in form's own CSRF token (no session yet): a random value in a cookie and in the form. */
const SIGN_IN_COOKIE = 'console_sign_in';

/** Signing in with an API key (a session cookie in exchange), signing out, and choosing the workspace. */
export function signInRoutes(pages: ConsolePages): void {
  const { app, deps, signedIn, frameOf } = pages;
  const { services, sessions } = deps;

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
}
