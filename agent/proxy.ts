import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connectTo, type Upstream, upstreamKey } from './upstream.ts';

type Route = { upstream: Upstream; key: string };

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

  /** Points the deployment's host names at `upstream`. */
  route(hosts: string[], upstream: Upstream): void {
    for (const host of hosts) this.#routes.set(host.toLowerCase(), { upstream, key: upstreamKey(upstream) });
  }

  unroute(hosts: string[]): void {
    for (const host of hosts) this.#routes.delete(host.toLowerCase());
  }

  /** Replaces the whole routing table in one step (the agent sends it whole). */
  replaceRoutes(routes: Array<{ hosts: string[]; upstream: Upstream }>): void {
    this.#routes.clear();
    for (const { hosts, upstream } of routes) this.route(hosts, upstream);
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

  listen(port: number, host: string): Promise<number> {
    const server = createServer((req, res) => {
      const target = this.#target(req.headers.host, req.url ?? '/');
      if (!target) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ detail: `No deployment is served here for host ${req.headers.host ?? ''}.` }));
        return;
      }
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
          answer.on('error', finish);
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
