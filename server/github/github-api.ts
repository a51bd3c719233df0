import { appJwt } from './app-jwt.ts';
import type { GithubApp } from './app-settings.ts';

/** A GitHub answer that was not 2xx: its status, its message and the headers that say when to retry. */
export class GithubApiError extends Error {
  override readonly name = 'GithubApiError';
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;

  constructor(method: string, path: string, status: number, headers: Headers, body: unknown) {
    // GitHub puts the reason of a 422 in `errors[].message` ("…reached the maximum number of statuses").
    const record = typeof body === 'object' && body !== null ? (body as { message?: unknown; errors?: unknown }) : {};
    const reasons = Array.isArray(record.errors)
      ? record.errors
          .map((e) => (typeof e === 'object' && e !== null && 'message' in e ? String((e as { message: unknown }).message) : typeof e === 'string' ? e : ''))
          .filter(Boolean)
      : [];
    const message = [record.message === undefined ? '' : String(record.message), ...reasons].filter(Boolean).join(': ');
    super(`GitHub answered ${status} to ${method} ${path}${message ? `: ${message}` : ''}`);
    this.status = status;
    this.headers = headers;
    this.body = body;
  }
}

/** How a call authenticates: as the App (JWT), as an installation or user (token), or not at all. */
export type GithubAuth = { kind: 'app' } | { kind: 'token'; token: string } | { kind: 'none' };

export type GithubRequest = { method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; path: string; auth: GithubAuth; body?: unknown; signal?: AbortSignal };

/** Time limit of one GitHub call: a slow GitHub holds up neither a claim nor the outbox for long. */
const TIMEOUT_MS = 15_000;

/**
 * GitHub's REST API at `GITHUB_API_URL`, with the headers GitHub asks for (API version, JSON
 * media type, a User-Agent). The token goes only in the Authorization header; an error names the
 * method, path and GitHub's message, never a header.
 */
export class GithubApi {
  readonly #app: GithubApp;
  readonly #now: () => number;

  constructor(app: GithubApp, now: () => number = Date.now) {
    this.#app = app;
    this.#now = now;
  }

  get app(): GithubApp {
    return this.#app;
  }

  /**
   * Exchanges the `code` GitHub gave the setup URL for a user token
   * (`GITHUB_URL/login/oauth/access_token`, the App's client id and secret); null with GitHub's
   * reason when it refuses (an expired or used code: GitHub answers 200 with an `error`).
   */
  async exchangeCode(code: string): Promise<{ token: string } | { error: string }> {
    const client = this.#app.client;
    if (!client) return { error: "the App's client id and secret are not configured" };
    const response = await fetch(`${this.#app.webUrl}/login/oauth/access_token`, {
      method: 'POST',
      // Form-encoded, as OAuth 2.0 (RFC 6749 §4.1.3) has token requests; JSON asked back.
      headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded', 'user-agent': `agent-control-plane/${this.#app.appId}` },
      body: new URLSearchParams({ client_id: client.id, client_secret: client.secret, code }).toString(),
      signal: AbortSignal.timeout(TIMEOUT_MS),
      redirect: 'error',
    });
    const body = (await response.json().catch(() => null)) as { access_token?: unknown; error?: unknown; error_description?: unknown } | null;
    if (response.ok && typeof body?.access_token === 'string' && body.access_token.length > 0) return { token: body.access_token };
    return {
      error:
        typeof body?.error === 'string'
          ? `${body.error}${typeof body.error_description === 'string' ? `: ${body.error_description}` : ''}`
          : `GitHub answered ${response.status}`,
    };
  }

  async request<T>(request: GithubRequest): Promise<T> {
    let authorization: string | undefined;
    if (request.auth.kind === 'app') authorization = `Bearer ${await appJwt(this.#app.appId, this.#app.privateKey, this.#now())}`;
    else if (request.auth.kind === 'token') authorization = `Bearer ${request.auth.token}`;
    return restCall<T>(this.#app.apiUrl, request, `agent-control-plane/${this.#app.appId}`, authorization);
  }
}

/**
 * One call of GitHub's REST API at `apiUrl` with the headers GitHub asks for (API version, JSON
 * media type, a User-Agent); also for calls made before any App exists (the manifest conversion).
 */
export async function restCall<T>(apiUrl: string, request: Omit<GithubRequest, 'auth'>, userAgent: string, authorization?: string): Promise<T> {
  const headers: Record<string, string> = {
    accept: 'application/vnd.github+json',
    'x-github-api-version': '2022-11-28',
    'user-agent': userAgent,
  };
  if (authorization) headers.authorization = authorization;
  if (request.body !== undefined) headers['content-type'] = 'application/json';
  const signal = request.signal ? AbortSignal.any([request.signal, AbortSignal.timeout(TIMEOUT_MS)]) : AbortSignal.timeout(TIMEOUT_MS);
  const response = await fetch(`${apiUrl}${request.path}`, {
    method: request.method,
    headers,
    body: request.body === undefined ? undefined : JSON.stringify(request.body),
    signal,
    redirect: 'error',
  });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text.slice(0, 200);
  }
  if (!response.ok) throw new GithubApiError(request.method, request.path, response.status, response.headers, body);
  return body as T;
}
