import { z } from 'zod';
import { HTTPValidationError, page } from './schemas/common.ts';
import { BulkDeleteResult, Deployment, type DeploymentCreate, type DeploymentPatch, PushToken, type RevisionCreate, UploadUrl } from './schemas/deployment.ts';
import { GithubTokenExchanged } from './schemas/github-trust.ts';
import { GithubIntegration } from './schemas/integration.ts';
import { Listener } from './schemas/listener.ts';
import { type LogEntry, type LogType, Revision, RevisionLogs } from './schemas/revision.ts';

/** The API answered with an error status that retrying will not change (4xx other than 429, or retries ran out). */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly detail: string;
  constructor(status: number, detail: string, what: string) {
    super(`${what} failed with HTTP ${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

/** The API could not be reached, or kept answering 429/5xx, through every retry. */
export class TransientError extends Error {
  override readonly name = 'TransientError';
}

/** A response body that does not match the schema the client expects: a server of another version. */
export class ResponseShapeError extends Error {
  override readonly name = 'ResponseShapeError';
}

export type RetryEvent = { what: string; attempt: number; delayMs: number; reason: string };

export type ClientOptions = {
  baseUrl: string;
  /** Empty for a client that only exchanges a GitHub Actions OIDC token for a key (no key header is sent). */
  apiKey: string;
  /** Sent as `X-Tenant-Id`: picks the workspace for an organization-scoped key. */
  workspaceId?: string | undefined;
  /** How many times one request is retried after a transient failure (default 4). */
  retries?: number;
  /** First backoff delay; it doubles on each retry, with jitter, up to 10 s (default 500 ms). */
  retryBaseMs?: number;
  fetch?: typeof fetch;
  /** Injected so tests can see the delays without waiting them out. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  onRetry?: (event: RetryEvent) => void;
  /** Each `Warning` the server sends (e.g. `Unknown field ignored: body.x`), with what was being done. */
  onWarning?: (event: WarningEvent) => void;
  userAgent?: string;
};

export type WarningEvent = { what: string; text: string };

/**
 * The texts of a `Warning` header (RFC 7234: `<code> <agent> "<text>"`, several joined by commas
 * when a fetch implementation folds them): each quoted text, unescaped; a value in no known form whole.
 */
export function warningTexts(header: string | null): string[] {
  if (!header) return [];
  const texts = [...header.matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)].map((match) => {
    try {
      return JSON.parse(`"${match[1]}"`) as string;
    } catch {
      return match[1]!;
    }
  });
  return texts.length > 0 ? texts : [header];
}

type RequestOptions<T> = {
  what: string;
  schema: z.ZodType<T> | null;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** Statuses that are answers rather than errors (e.g. 304 of a conditional GET). */
  accept?: readonly number[];
  /** Per-attempt time limit; a long-poll needs more than an ordinary request. */
  timeoutMs?: number;
};

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_BACKOFF_MS = 10_000;
/**
 * Statuses after which the server has certainly not acted, so even a POST or PATCH may be sent
 * again. Not 502 or 504: a proxy answers those when the server may have acted and then failed to
 * answer in time, and a second create or PATCH would then act twice.
 */
const NOT_ACTED = new Set([429, 503]);
/** A `Retry-After` longer than this is shortened: one answer must not stall a run past its deadline. */
const MAX_RETRY_AFTER_MS = MAX_BACKOFF_MS;
/** Socket errors raised before a request reached the server. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** Sleeps `ms`, or rejects with the signal's reason when it aborts first. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `Retry-After` as delta-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null || header.trim() === '') return null;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** The sentence an error body carries: `detail` as a string, or the 422 issues joined. */
function describeErrorBody(text: string): string {
  try {
    const json: unknown = JSON.parse(text);
    const issues = HTTPValidationError.safeParse(json);
    if (issues.success) return issues.data.detail.map((issue) => `${issue.loc.join('.')}: ${issue.msg}`).join('; ');
    if (json && typeof json === 'object' && 'detail' in json && typeof json.detail === 'string') return json.detail;
  } catch {
    // not JSON: fall through to the text itself
  }
  return text.slice(0, 500) || '(empty body)';
}

function errorCode(error: unknown): string | undefined {
  const cause = error instanceof Error ? (error.cause as { code?: string } | undefined) : undefined;
  return cause?.code ?? (error as { code?: string } | undefined)?.code;
}

export type RevisionPoll = { changed: false; etag: string } | { changed: true; etag: string; revision: Revision };

/**
 * A typed client of the control-plane REST API. Answers are parsed with the same zod schemas the
 * server validates with. 429, 5xx and network errors are retried with exponential backoff that
 * honours `Retry-After`; a POST or PATCH is sent again only when the server cannot have acted on it
 * (429/502/503/504, or a connection that was never made), so a retry never creates twice.
 */
export class ApiClient {
  readonly #options: Required<Pick<ClientOptions, 'retries' | 'retryBaseMs' | 'sleep'>> & ClientOptions;
  readonly #base: string;

  constructor(options: ClientOptions) {
    this.#options = { retries: 4, retryBaseMs: 500, sleep: abortableSleep, ...options };
    this.#base = options.baseUrl.replace(/\/+$/, '');
  }

  /** Sends one request with retries; answers the response and its parsed body. */
  async request<T>(method: string, path: string, options: RequestOptions<T>): Promise<{ status: number; headers: Headers; body: T | null }> {
    const { retries, retryBaseMs, sleep, onRetry } = this.#options;
    const idempotent = method === 'GET' || method === 'DELETE' || method === 'PUT';
    for (let attempt = 0; ; attempt++) {
      options.signal?.throwIfAborted();
      let retryReason: string;
      let retryDelay: number | null = null;
      try {
        const response = await this.#send(method, path, options);
        for (const text of warningTexts(response.headers.get('warning'))) this.#options.onWarning?.({ what: options.what, text });
        if (response.ok || options.accept?.includes(response.status)) {
          const text = response.status === 204 || response.status === 304 ? '' : await response.text();
          return { status: response.status, headers: response.headers, body: text && options.schema ? this.#parse(options.schema, text, options.what) : null };
        }
        const text = await response.text();
        const transient = response.status === 429 || response.status >= 500;
        if (!transient || (!idempotent && !NOT_ACTED.has(response.status))) {
          throw new ApiError(response.status, describeErrorBody(text), options.what);
        }
        if (attempt >= retries) {
          throw new TransientError(`${options.what} failed with HTTP ${response.status} after ${attempt + 1} attempts: ${describeErrorBody(text)}`);
        }
        retryReason = `HTTP ${response.status}`;
        const asked = retryAfterMs(response.headers.get('retry-after'));
        retryDelay = asked === null ? null : Math.min(asked, MAX_RETRY_AFTER_MS);
      } catch (error) {
        if (error instanceof ApiError || error instanceof ResponseShapeError) throw error;
        if (options.signal?.aborted) throw options.signal.reason;
        const code = errorCode(error);
        const notSent = code !== undefined && NOT_SENT_CODES.has(code);
        const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
        const message = `${error instanceof Error ? error.message : String(error)}${cause}${code && !cause.includes(code) ? ` (${code})` : ''}`;
        if ((!idempotent && !notSent) || attempt >= retries) {
          throw new TransientError(`${options.what} failed: ${message}${attempt > 0 ? ` after ${attempt + 1} attempts` : ''}`);
        }
        retryReason = message;
      }
      const backoff = Math.min(MAX_BACKOFF_MS, retryBaseMs * 2 ** attempt);
      // Full jitter on the upper half, so many runners retrying together spread out.
      const delayMs = retryDelay ?? Math.round(backoff / 2 + Math.random() * (backoff / 2));
      onRetry?.({ what: options.what, attempt: attempt + 1, delayMs, reason: retryReason });
      await sleep(delayMs, options.signal);
    }
  }

  async #send(method: string, path: string, options: RequestOptions<unknown>): Promise<Response> {
    const { apiKey, workspaceId, userAgent } = this.#options;
    const fetchFn = this.#options.fetch ?? fetch;
    const timeout = AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const headers: Record<string, string> = {
      ...(apiKey ? { 'x-api-key': apiKey } : {}),
      accept: 'application/json',
      'user-agent': userAgent ?? 'agent-deploy',
      ...(workspaceId ? { 'x-tenant-id': workspaceId } : {}),
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    };
    return fetchFn(this.#base + path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal,
    });
  }

  #parse<T>(schema: z.ZodType<T>, text: string, what: string): T {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ResponseShapeError(`${what}: the answer is not JSON: ${text.slice(0, 200)}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      throw new ResponseShapeError(`${what}: unexpected answer (${first ? `${first.path.join('.')}: ${first.message}` : 'invalid'}); is the API URL right?`);
    }
    return parsed.data;
  }

  async #json<T>(method: string, path: string, schema: z.ZodType<T>, what: string, extra: Partial<RequestOptions<T>> = {}): Promise<T> {
    const { body } = await this.request(method, path, { what, schema, ...extra });
    if (body === null) throw new ResponseShapeError(`${what}: empty answer`);
    return body;
  }

  /**
   * `POST /v1/auth/github-actions/token`: a GitHub Actions OIDC ID token for a workspace key of at
   * most an hour (keyless CI). `workspaceId` only when several workspaces trust the repository.
   */
  exchangeGithubToken(token: string, workspaceId?: string, signal?: AbortSignal): Promise<GithubTokenExchanged> {
    return this.#json('POST', '/v1/auth/github-actions/token', GithubTokenExchanged, 'POST GitHub OIDC token exchange', {
      body: { token, ...(workspaceId ? { workspace_id: workspaceId } : {}) },
      signal,
    });
  }

  getDeployment(id: string, signal?: AbortSignal): Promise<Deployment> {
    return this.#json('GET', `/v2/deployments/${encodeURIComponent(id)}`, Deployment, `GET deployment ${id}`, { signal });
  }

  /** The deployment with exactly this name, or null; `name_contains` narrows the list on the server. */
  async findDeploymentByName(name: string, signal?: AbortSignal): Promise<Deployment | null> {
    for (let offset = 0; ; offset += 100) {
      const result = await this.#json(
        'GET',
        `/v2/deployments?name_contains=${encodeURIComponent(name)}&limit=100&offset=${offset}`,
        page(Deployment),
        `GET deployments named ${name}`,
        { signal },
      );
      const exact = result.resources.find((deployment) => deployment.name === name);
      if (exact) return exact;
      if (result.resources.length < 100) return null;
    }
  }

  createDeployment(body: DeploymentCreate, signal?: AbortSignal): Promise<Deployment> {
    return this.#json('POST', '/v2/deployments', Deployment, `POST deployment ${body.name}`, { body, signal });
  }

  patchDeployment(id: string, body: DeploymentPatch, signal?: AbortSignal): Promise<Deployment> {
    return this.#json('PATCH', `/v2/deployments/${encodeURIComponent(id)}`, Deployment, `PATCH deployment ${id}`, { body, signal });
  }

  /** `POST …/revisions`: a new revision (an empty body rebuilds the latest config). */
  createRevision(deploymentId: string, body: RevisionCreate = {}, signal?: AbortSignal): Promise<Revision> {
    return this.#json('POST', `/v2/deployments/${encodeURIComponent(deploymentId)}/revisions`, Revision, `POST revision of ${deploymentId}`, { body, signal });
  }

  /** Bulk delete (≤ 100 ids): what was deleted and what failed, whether the server answered 200 or 207. */
  deleteDeployments(ids: string[], signal?: AbortSignal): Promise<BulkDeleteResult> {
    const query = ids.map((id) => `deployment_ids=${encodeURIComponent(id)}`).join('&');
    return this.#json('DELETE', `/v2/deployments?${query}`, BulkDeleteResult, `DELETE ${ids.length} deployments`, { signal });
  }

  /** `internal_source`: a signed URL to PUT a gzip tarball to, and the `object_path` to PATCH as `source_tarball_path`. */
  uploadUrl(deploymentId: string, signal?: AbortSignal): Promise<UploadUrl> {
    return this.#json('POST', `/v2/deployments/${encodeURIComponent(deploymentId)}/upload-url`, UploadUrl, `POST upload-url of ${deploymentId}`, {
      body: {},
      signal,
    });
  }

  /** `internal_docker`: the registry and a token to push the image with. */
  pushToken(deploymentId: string, signal?: AbortSignal): Promise<PushToken> {
    return this.#json('POST', `/v2/deployments/${encodeURIComponent(deploymentId)}/push-token`, PushToken, `POST push-token of ${deploymentId}`, {
      body: {},
      signal,
    });
  }

  /** A revision and its ETag. */
  async getRevision(deploymentId: string, revisionId: string, signal?: AbortSignal): Promise<{ revision: Revision; etag: string | null }> {
    const { body, headers } = await this.request('GET', this.#revisionPath(deploymentId, revisionId), {
      what: `GET revision ${revisionId}`,
      schema: Revision,
      signal,
    });
    if (!body) throw new ResponseShapeError(`GET revision ${revisionId}: empty answer`);
    return { revision: body, etag: headers.get('etag') };
  }

  /**
   * The conditional long-poll: the server holds the request until the revision's ETag differs from
   * `etag` (200 with the new revision) or `waitSeconds` pass (304).
   */
  async pollRevision(deploymentId: string, revisionId: string, etag: string, waitSeconds: number, signal?: AbortSignal): Promise<RevisionPoll> {
    const wait = Math.max(0, Math.min(60, Math.round(waitSeconds * 1000) / 1000));
    const { status, headers, body } = await this.request('GET', this.#revisionPath(deploymentId, revisionId), {
      what: `GET revision ${revisionId}`,
      schema: Revision,
      signal,
      headers: { 'if-none-match': etag, prefer: `wait=${wait}` },
      accept: [304],
      timeoutMs: Math.ceil(wait * 1000) + DEFAULT_TIMEOUT_MS,
    });
    const newEtag = headers.get('etag') ?? etag;
    if (status === 304 || body === null) return { changed: false, etag: newEtag };
    return { changed: true, etag: newEtag, revision: body };
  }

  async listRevisions(deploymentId: string, limit = 20, signal?: AbortSignal): Promise<Revision[]> {
    const result = await this.#json(
      'GET',
      `/v2/deployments/${encodeURIComponent(deploymentId)}/revisions?limit=${limit}`,
      page(Revision),
      `GET revisions of ${deploymentId}`,
      { signal },
    );
    return result.resources;
  }

  interruptRevision(deploymentId: string, revisionId: string, signal?: AbortSignal): Promise<Revision> {
    return this.#json('POST', `${this.#revisionPath(deploymentId, revisionId)}/interrupt`, Revision, `POST interrupt of revision ${revisionId}`, {
      signal,
      body: {},
    });
  }

  /** The last `count` log lines of one type (the route pages from the start, so read to the end). */
  async lastLogLines(deploymentId: string, revisionId: string, type: LogType, count: number, signal?: AbortSignal): Promise<LogEntry[]> {
    let lines: LogEntry[] = [];
    let offset = 0;
    for (let pages = 0; pages < 100; pages++) {
      const result = await this.#json(
        'GET',
        `${this.#revisionPath(deploymentId, revisionId)}/logs?type=${type}&limit=1000&offset=${offset}`,
        RevisionLogs,
        `GET ${type} logs of revision ${revisionId}`,
        { signal },
      );
      lines = [...lines, ...result.logs].slice(-count);
      if (result.next_offset === null || result.logs.length < 1000) break;
      offset = result.next_offset;
    }
    return lines;
  }

  async listListeners(signal?: AbortSignal): Promise<Listener[]> {
    return (await this.#json('GET', '/v2/listeners?limit=100', page(Listener), 'GET listeners', { signal })).resources;
  }

  listIntegrations(signal?: AbortSignal): Promise<GithubIntegration[]> {
    return this.#json('GET', '/v1/integrations/github/install', z.array(GithubIntegration), 'GET GitHub integrations', { signal });
  }

  #revisionPath(deploymentId: string, revisionId: string): string {
    return `/v2/deployments/${encodeURIComponent(deploymentId)}/revisions/${encodeURIComponent(revisionId)}`;
  }
}
