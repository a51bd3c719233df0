import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processIdentity } from './build-records.ts';
import { socketRootOf } from './socket-root.ts';
import { type Upstream, upstreamKey } from './upstream.ts';

type Status = { pid: number; port: number; host: string };

/**
 * The agent's handle on its proxy process (proxy-process.ts): starts it when none runs for the
 * work directory (or one runs on another port), keeps the routing table here, and sends it
 * whole on every change once `publish()` was called (before that, during the restore of the live
 * revisions, the running proxy keeps the table the previous agent left).
 */
export class ProxyClient {
  readonly #dir: string;
  readonly #socket: string;
  readonly #record: string;
  /** Each deployment's routes, by deployment id: a deployment whose host names changed (its placeholder URL, then its custom_url) has one entry, which goes with it. */
  readonly #table = new Map<string, { hosts: string[]; upstream: Upstream }>();
  #published = false;
  #sending: Promise<void> = Promise.resolve();

  constructor(workDir: string) {
    this.#dir = join(workDir, '.proxy');
    // A long work directory's sockets live under a short folder standing for it (socket-root.ts).
    this.#socket = join(socketRootOf(workDir), '.proxy', 'control.sock');
    this.#record = join(this.#dir, 'proxy.json');
  }

  /** Makes sure a proxy serves `port` on `host` (0: whatever port a running one has, else any free one); answers the port. */
  async listen(port: number, host: string): Promise<number> {
    const running = await this.#status();
    if (running && running.host === host && (port === 0 || running.port === port)) return running.port;
    if (running) await this.#call('POST', '/exit').catch(() => undefined);
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    const log = openSync(join(this.#dir, 'proxy.log'), 'a');
    const entry = resolve(fileURLToPath(new URL('.', import.meta.url)), 'proxy-main.ts');
    // Nothing of the agent's environment (its token) goes to the proxy: it needs none.
    const child = spawn(process.execPath, [entry, '--port', String(port), '--host', host, '--control', this.#socket, '--record', this.#record], {
      detached: true,
      stdio: ['ignore', log, log],
      env: {},
    });
    closeSync(log);
    child.unref();
    const deadline = Date.now() + 15_000;
    for (;;) {
      const status = await this.#status();
      if (status && status.pid === child.pid) return status.port;
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(`the proxy did not start on ${host}:${port}: ${readFileSync(join(this.#dir, 'proxy.log'), 'utf8').slice(-500)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Serves the deployment's host names (all it has now: any it had before stop answering) from `upstream`. */
  route(deploymentId: string, hosts: string[], upstream: Upstream): void {
    this.#table.set(deploymentId, { hosts, upstream });
    this.#push();
  }

  /** Resolves once the proxy has taken every route change given so far (or its control socket failed them). */
  routed(): Promise<void> {
    return this.#sending.catch(() => undefined);
  }

  /** The deployment is no longer served here: every host name and path it had answers 404. */
  unroute(deploymentId: string): void {
    this.#table.delete(deploymentId);
    this.#push();
  }

  /**
   * How the proxy checks `X-Api-Key`: with the control plane at `url` as this agent (`token`),
   * answers kept `ttlMs`; or not at all (`public`). Sent before any route is, so no deployment is
   * ever served without the check it should have.
   */
  async checkKeys(settings: { public: true } | { url: string; token: string; ttlMs: number }): Promise<void> {
    await this.#call('PUT', '/key-check', 'public' in settings ? settings : { url: settings.url, token: settings.token, ttl_ms: settings.ttlMs });
  }

  /** Sends the table as it is now, and every change after it. */
  publish(): Promise<void> {
    this.#published = true;
    this.#push();
    return this.#sending;
  }

  /** Resolves when no request is forwarded to `upstream` any more (or after `maxMs`). */
  async drained(upstream: Upstream, maxMs = 10_000): Promise<void> {
    await this.#sending;
    await this.#call('GET', `/drained?upstream=${encodeURIComponent(upstreamKey(upstream))}&max_ms=${maxMs}`).catch(() => undefined);
  }

  /** `stopProxy`: the agent stops for good (SIGINT); otherwise the proxy serves on for the next agent. */
  async close(stopProxy = true): Promise<void> {
    await this.#sending;
    if (stopProxy) await this.#call('POST', '/exit').catch(() => undefined);
  }

  #push(): void {
    if (!this.#published) return;
    const routes = [...this.#table.entries()].map(([deploymentId, { hosts, upstream }]) => ({ deploymentId, hosts, upstream }));
    this.#sending = this.#sending.then(() => this.#call('PUT', '/routes', { routes }).then(() => undefined));
  }

  async #status(): Promise<Status | null> {
    try {
      const record = JSON.parse(readFileSync(this.#record, 'utf8')) as { pid: number; identity: string | null };
      if (processIdentity(record.pid) !== record.identity) return null;
      return (await this.#call('GET', '/status')) as Status;
    } catch {
      return null;
    }
  }

  #call(method: string, path: string, body?: unknown): Promise<unknown> {
    return new Promise((resolvePromise, reject) => {
      const req = request(
        { socketPath: this.#socket, method, path, headers: body === undefined ? {} : { 'content-type': 'application/json' }, timeout: 30_000 },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () =>
            (res.statusCode ?? 500) < 300
              ? resolvePromise(text ? JSON.parse(text) : null)
              : reject(new Error(`proxy control ${method} ${path}: ${res.statusCode} ${text}`)),
          );
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error('proxy control request timed out')));
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }
}
