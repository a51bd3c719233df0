import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KeyChecker } from './key-check.ts';
import { connectTo, type Upstream, upstreamKey } from './upstream.ts';

type Route = { deploymentId: string; upstream: Upstream; key: string };

/** What a deployment's route is made of: the deployment, its host names, its server. */
export type RouteEntry = { deploymentId: string; hosts: string[]; upstream: Upstream };

/** The header the key comes in, as on the hosted product (and the LangGraph SDK's `api_key`). */
const KEY_HEADER = 'x-api-key';

/**
 * The reverse proxy of a `local` listener: a request's `Host` names the deployment (its
 * `custom_url` host name, or `<name>.<anything>` with the name's DNS-safe form), or its path does
 * (`/d/<name>/…`); it is forwarded to that deployment's live agent server (its socket, or its port). Switching a
 * route is one map write; requests already forwarded finish on the old server, and
 * `drained(upstream)` tells when none is left, so the old server can be stopped.
 */
export class DeploymentProxy {
  readonly #routes = new Map<string, Route>();
  readonly #inFlight = new Map<string, number>();
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 256 });
  #server: Server | null = null;
  #closing = false;
  /** Null: every request is forwarded without a key (`--public`, or before the agent sent its settings). */
  #keys: KeyChecker | null = null;

  /** From now on requests need a key `keys` allows (null: none needed). */
  checkKeys(keys: KeyChecker | null): void {
    this.#keys = keys;
  }

  /** Points the deployment's host names at `upstream`. */
  route({ deploymentId, hosts, upstream }: RouteEntry): void {
    for (const host of hosts) this.#routes.set(host.toLowerCase(), { deploymentId, upstream, key: upstreamKey(upstream) });
  }

  unroute(hosts: string[]): void {
    for (const host of hosts) this.#routes.delete(host.toLowerCase());
  }

  /** Replaces the whole routing table in one step (the agent sends it whole). */
  replaceRoutes(routes: RouteEntry[]): void {
    this.#routes.clear();
    for (const entry of routes) this.route(entry);
  }

  /** Resolves when no request is being forwarded to the upstream named `key` (upstreamKey), or after `maxMs`. */
  async drained(key: string, maxMs = 10_000): Promise<void> {
    const deadline = Date.now() + maxMs;
    while ((this.#inFlight.get(key) ?? 0) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  }

  /**
   * The deployment a request is for, and the path to forward: by its `Host` (a deployment's host
   * name, or its DNS-safe name as the first label), else by its path, `/d/<name>/…` with the
   * prefix stripped, for clients that cannot resolve `*.localhost`.
   */
  #target(hostHeader: string | undefined, url: string): (Route & { path: string }) | null {
    const host = (hostHeader ?? '').replace(/:\d+$/, '').toLowerCase();
    const byHost = this.#routes.get(host) ?? this.#routes.get(host.split('.')[0] ?? '');
    if (byHost) return { ...byHost, path: url };
    const prefixed = /^\/d\/([^/?#]+)(.*)$/.exec(url);
    const byPath = prefixed ? this.#routes.get(decodeURIComponent(prefixed[1]!).toLowerCase()) : undefined;
    if (!byPath || !prefixed) return null;
    const rest = prefixed[2] ?? '';
    return { ...byPath, path: rest.startsWith('/') ? rest : `/${rest}` };
  }

  /**
   * Why a request may not reach the deployment, or null when it may: `GET /ok` is open (health
   * checks); otherwise `X-Api-Key` must hold a key of the deployment's workspace or organization.
   */
  async #refusal(
    method: string | undefined,
    target: Route & { path: string },
    header: string | string[] | undefined,
  ): Promise<{ status: number; detail: string; headers?: Record<string, string> } | null> {
    const keys = this.#keys;
    if (!keys) return null;
    if (method === 'GET' && (target.path === '/ok' || target.path.startsWith('/ok?'))) return null;
    const key = Array.isArray(header) ? header[0] : header;
    const challenge = { 'www-authenticate': 'ApiKey header="X-Api-Key"' };
    if (!key) return { status: 401, detail: 'Missing API key: send a key of the deployment’s workspace in the X-Api-Key header.', headers: challenge };
    let verdict: Awaited<ReturnType<KeyChecker['check']>>;
    try {
      verdict = await keys.check(target.deploymentId, key);
    } catch (error) {
      return { status: 503, detail: `The API key could not be checked with the control plane: ${(error as Error).message}`, headers: { 'retry-after': '5' } };
    }
    if (verdict === 'invalid') return { status: 401, detail: 'Invalid or revoked API key.', headers: challenge };
    if (verdict === 'other_workspace') return { status: 403, detail: 'This API key may not use this deployment: it belongs to another workspace.' };
    return null;
  }

  listen(port: number, host: string): Promise<number> {
    const server = createServer(async (req, res) => {
      const target = this.#target(req.headers.host, req.url ?? '/');
      if (!target) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ detail: `No deployment is served here for host ${req.headers.host ?? ''}.` }));
        return;
      }
      const refused = await this.#refusal(req.method, target, req.headers[KEY_HEADER]);
      if (refused) {
        req.resume();
        res.writeHead(refused.status, { 'content-type': 'application/json', ...refused.headers }).end(JSON.stringify({ detail: refused.detail }));
        return;
      }
      // The key is the caller's credential for the control plane: the deployment's code never sees it.
      delete req.headers[KEY_HEADER];
      const { key } = target;
      this.#inFlight.set(key, (this.#inFlight.get(key) ?? 0) + 1);
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        this.#inFlight.set(key, (this.#inFlight.get(key) ?? 1) - 1);
      };
      const upstream = request(
        {
          ...connectTo(target.upstream),
          method: req.method,
          path: target.path,
          headers: { ...req.headers, 'x-forwarded-host': req.headers.host ?? '' },
          agent: this.#agent,
        },
        (answer) => {
          // Closing: the client's next request opens a new connection instead of racing the close of this one.
          const headers = this.#closing ? { ...answer.headers, connection: 'close' } : answer.headers;
          res.writeHead(answer.statusCode ?? 502, headers);
          answer.pipe(res);
          answer.on('end', finish);
          // The server died mid-answer (it crashed during a streamed run): the client's answer is
          // cut too, or it would wait forever for the rest.
          answer.on('error', () => {
            finish();
            res.destroy();
          });
          answer.on('close', () => {
            if (!answer.complete) res.destroy();
          });
        },
      );
      upstream.on('error', (error) => {
        finish();
        if (!res.headersSent)
          res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: `The agent server did not answer: ${error.message}` }));
        else res.destroy();
      });
      // A client gone before its answer finished (a dropped SSE stream, a closed tab): end the
      // upstream request too, or its socket stays taken from the pool (at most 256) for as long
      // as the agent server keeps streaming, and the proxy stalls once they are all held.
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
        finish();
      });
      req.pipe(upstream);
    });
    this.#server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  /**
   * Stops taking connections and lets every connection end on an answer: from now on each answer
   * says `Connection: close`; a connection idle now may still carry one more request for
   * `idleGraceMs` (closing it at once races a client that is just reusing it); after `graceMs`
   * whatever is left is closed.
   */
  async close(options: { idleGraceMs?: number; graceMs?: number } = {}): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#closing = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const idleUntil = Date.now() + (options.idleGraceMs ?? 2000);
    const deadline = Date.now() + (options.graceMs ?? 10_000);
    while (Date.now() < deadline && (Date.now() < idleUntil || [...this.#inFlight.values()].some((n) => n > 0))) {
      await new Promise((r) => setTimeout(r, 25));
    }
    server.closeIdleConnections();
    server.closeAllConnections();
    await closed;
    this.#agent.destroy();
  }
}
