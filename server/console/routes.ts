import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { getCookie } from 'hono/cookie';
import { NotFound } from '../domain/errors.ts';
import { errorResponse } from '../http/errors.ts';
import { CONSOLE_CSS, CONSOLE_JS } from './assets.ts';
import type { ConsoleDeps } from './console.ts';
import { deploymentRoutes } from './deployment-routes.ts';
import { errorPage } from './pages/sign-in.ts';
import { type ConsoleEnv, consolePages, htmlAnswer, own, refuse, SESSION_COOKIE, sameOrigin } from './route-kit.ts';
import { settingsRoutes } from './settings-routes.ts';
import { signInRoutes } from './sign-in-routes.ts';

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
  const { services, sessions } = deps;
  const app = new Hono<ConsoleEnv>();
  const pages = consolePages(app, deps);

  app.onError(async (error, c) => {
    // The API's one error mapping decides the status and the sentence; the console shows them as a page.
    const answer = errorResponse(error, c, services);
    const body = (await answer.json()) as { detail: unknown; request_id?: string };
    const detail = typeof body.detail === 'string' ? body.detail : 'The form was not filled in as expected.';
    const session = c.get('session') ?? null;
    const frame = session ? await pages.frameOf(session).catch(() => undefined) : undefined;
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

  app.get('/assets/console.css', (c) => c.body(CONSOLE_CSS, 200, { 'content-type': 'text/css; charset=utf-8' }));
  app.get('/assets/console.js', (c) => c.body(CONSOLE_JS, 200, { 'content-type': 'text/javascript; charset=utf-8' }));
  signInRoutes(pages);
  deploymentRoutes(pages);
  settingsRoutes(pages);

  // Anything else under /console is a page that does not exist: said as a page, not as JSON.
  app.all(
    '*',
    own(() => {
      throw new NotFound('There is no such page in the console.');
    }),
  );

  return app;
}
