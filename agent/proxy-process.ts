import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { processIdentity } from './build-records.ts';
import { KeyChecker } from './key-check.ts';
import { DeploymentProxy, type RouteEntry } from './proxy.ts';

/**
 * The agent's reverse proxy as a process of its own, so that it outlives a restart of the agent:
 * the port stays open and every connection keeps being answered while one agent stops and the
 * next starts. The agent drives it over a control socket in its work directory (not reachable
 * from the sandboxes): `PUT /routes` replaces the routing table, `PUT /key-check` says how keys are checked, `GET /drained?upstream=` waits until
 * no request is forwarded to a server, `GET /status`, `POST /exit`.
 */
export async function runProxyProcess(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { port: { type: 'string' }, host: { type: 'string' }, control: { type: 'string' }, record: { type: 'string' } },
  });
  if (!values.port || !values.host || !values.control || !values.record)
    throw new Error('usage: proxy-main.ts --port <n> --host <h> --control <socket> --record <file>');
  const proxy = new DeploymentProxy();
  const port = await proxy.listen(Number(values.port), values.host);
  const control = createServer((req, res) => void answer(proxy, req, res, port, values.host!));
  mkdirSync(dirname(values.control), { recursive: true, mode: 0o700 });
  rmSync(values.control, { force: true });
  await new Promise<void>((resolve) => control.listen(values.control, resolve));
  chmodSync(values.control, 0o600);
  writeFileSync(values.record, JSON.stringify({ pid: process.pid, identity: processIdentity(process.pid), port, host: values.host }));
  const exit = async () => {
    control.close();
    await proxy.close({ idleGraceMs: 0 });
    rmSync(values.record!, { force: true });
    process.exit(0);
  };
  exitOnRequest = exit;
  process.on('SIGTERM', () => void exit());
  process.on('SIGINT', () => void exit());
}

let exitOnRequest: (() => Promise<void>) | null = null;

async function answer(proxy: DeploymentProxy, req: IncomingMessage, res: ServerResponse, port: number, host: string): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://control');
  const json = (status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  try {
    if (req.method === 'GET' && url.pathname === '/status') return json(200, { pid: process.pid, port, host });
    if (req.method === 'PUT' && url.pathname === '/routes') {
      let text = '';
      for await (const chunk of req) text += String(chunk);
      const { routes } = JSON.parse(text) as { routes: RouteEntry[] };
      proxy.replaceRoutes(routes);
      return json(200, { routes: routes.length });
    }
    if (req.method === 'PUT' && url.pathname === '/key-check') {
      // The agent's token comes over this socket (owner-only, in the work directory), never on a command line.
      let text = '';
      for await (const chunk of req) text += String(chunk);
      const settings = JSON.parse(text) as { public: true } | { url: string; token: string; ttl_ms: number };
      proxy.checkKeys('public' in settings ? null : new KeyChecker({ url: settings.url, token: settings.token, ttlMs: settings.ttl_ms }));
      return json(200, { checking: !('public' in settings) });
    }
    if (req.method === 'GET' && url.pathname === '/drained') {
      await proxy.drained(url.searchParams.get('upstream') ?? '', Number(url.searchParams.get('max_ms') ?? 10_000));
      return json(200, { drained: true });
    }
    if (req.method === 'POST' && url.pathname === '/exit') {
      json(200, { exiting: true });
      setImmediate(() => void exitOnRequest?.());
      return;
    }
    json(404, { detail: 'unknown control request' });
  } catch (error) {
    json(400, { detail: error instanceof Error ? error.message : String(error) });
  }
}
