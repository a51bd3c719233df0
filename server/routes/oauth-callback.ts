import type { Context } from 'hono';
import { z } from 'zod';
import { CallbackFinalize, ProviderSlug } from '../../shared/schemas/oauth.ts';
import { ValidationFailed } from '../domain/errors.ts';
import type { CallbackOutcome, CallbackQuery, OAuthFlows } from '../domain/oauth/flows.ts';
import type { AppEnv, RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { formNulProblem, readJson, readLimited, validate } from '../http/validation.ts';
import { CALLBACK_PAGE_HEADERS, callbackPage } from './oauth-page.ts';

/** The path the providers redirect back to; it takes no API key (the `state` authenticates it). */
export const OAUTH_CALLBACK_PATH = '/v2/auth/callback';

/**
 * A POSTed callback carries a code and a state (with form_post perhaps an id_token of a few KiB);
 * more is not a callback. Small, because anyone may POST here without a key.
 */
const CALLBACK_BODY_LIMIT = 16 * 1024;

/**
 * Where the user's browser comes back from the provider: `GET` and `POST`, at
 * `/v2/auth/callback` and `/v2/auth/callback/{provider_id}`. No API key: the `state` names the flow.
 */
export function oauthCallbackRoutes(ctx: RouteContext, flows: OAuthFlows, tag: string): void {
  const providerRef = (c: Context<AppEnv>) => c.req.param('provider_id') ?? '';
  /** `{provider_id}` is a slug, documented; read by the handler (the callback reads its own input). */
  const slugParam = { pathParams: { provider_id: ProviderSlug } };

  /** The outcome as a status and one sentence, for the HTML page and the JSON answer alike. */
  const describe = (outcome: CallbackOutcome): { status: 200 | 400 | 502; title: string; message: string } => {
    switch (outcome.kind) {
      case 'completed':
        return { status: 200, title: 'Authorization complete', message: 'You can close this window.' };
      case 'invalid_state':
        return { status: 400, title: 'Authorization failed', message: outcome.message };
      case 'failed': {
        const detail = outcome.description ? `${outcome.error}: ${outcome.description}` : outcome.error;
        return {
          status: outcome.providerUnavailable ? 502 : 400,
          title: 'Authorization failed',
          message: `No token was obtained (${detail}). You can close this window.`,
        };
      }
    }
  };
  const page = (c: Context<AppEnv>, outcome: CallbackOutcome) => {
    const { status, title, message } = describe(outcome);
    return c.html(callbackPage(title, message), status, CALLBACK_PAGE_HEADERS);
  };
  /** A front end that POSTs JSON reads JSON back: `{status, message}`, or `{detail}` as every error of the API. */
  const json = (c: Context<AppEnv>, outcome: CallbackOutcome) => {
    const { status, message } = describe(outcome);
    const body = status === 200 ? { status: 'completed', message: 'Authorization complete.' } : { detail: message };
    return c.json(body, status, { 'cache-control': 'no-store' });
  };
  const fromQuery = (c: Context<AppEnv>): CallbackQuery => ({
    state: c.req.query('state'),
    code: c.req.query('code'),
    error: c.req.query('error'),
    error_description: c.req.query('error_description'),
  });
  const isJson = (c: Context<AppEnv>) => /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(c.req.header('content-type') ?? '');
  /** A POSTed callback: a provider's `form_post` (form-encoded, answered with the page), or a front end handing on `{code, state}` (JSON, answered with JSON). */
  const posted = async (c: Context<AppEnv>, providerSlug: string | null) => {
    if (isJson(c)) return json(c, await flows.callback(await readJson(c, CallbackFinalize, CALLBACK_BODY_LIMIT), providerSlug));
    const text = new TextDecoder().decode(await readLimited(c.req.raw, CALLBACK_BODY_LIMIT));
    const form = new URLSearchParams(text);
    const nul = formNulProblem(form, 'body');
    if (nul) throw new ValidationFailed([nul]);
    const query = validate(CallbackFinalize, Object.fromEntries(form), 'body');
    return page(c, await flows.callback(query, providerSlug));
  };
  /** The callback's answers are pages for a browser, never {"detail"} JSON (hence no listed errors). */
  const callbackDoc = {
    summary: 'Where the provider sends the user back (HTML page; a POST of JSON is answered with JSON; state-checked, no API key)',
    tag,
    auth: 'oauth-state' as const,
    response: { status: 200, schema: z.string(), contentType: 'text/html', description: 'HTML page: authorization complete' },
    responses: [
      {
        status: 400,
        schema: z.string(),
        contentType: 'text/html',
        description: 'HTML page: unknown, used or expired state, a provider error, or a token answer that is not usable',
      },
      {
        status: 502,
        schema: z.string(),
        contentType: 'text/html',
        description: "HTML page: the provider's token endpoint could not be reached or may not be contacted",
      },
    ],
    errors: [],
    ownInput:
      'a browser comes back here: every answer is an HTML page, never a 422; a POST is a form or JSON, read by its Content-Type; the provider slug is only looked up',
  };
  const callbackQuery = z.object({
    state: z.string().optional(),
    code: z.string().optional(),
    error: z.string().optional(),
    error_description: z.string().optional(),
  });
  route(ctx, { method: 'get', path: OAUTH_CALLBACK_PATH, ...callbackDoc, query: callbackQuery }, async (c) => page(c, await flows.callback(fromQuery(c))));
  route(ctx, { method: 'post', path: OAUTH_CALLBACK_PATH, ...callbackDoc }, async (c) => posted(c, null));
  route(ctx, { method: 'get', path: `${OAUTH_CALLBACK_PATH}/:provider_id`, ...callbackDoc, ...slugParam, query: callbackQuery }, async (c) =>
    page(c, await flows.callback(fromQuery(c), providerRef(c))),
  );
  route(ctx, { method: 'post', path: `${OAUTH_CALLBACK_PATH}/:provider_id`, ...callbackDoc, ...slugParam }, async (c) => posted(c, providerRef(c)));
}
