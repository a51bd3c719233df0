/**
 * The cost per request of the sandboxed server's network path: the agent's proxy forwarding to an
 * upstream on a loopback port (the old path) against the same upstream reached through the relay a
 * sandbox runs (agent/sandbox-relay.mjs) on a unix socket (the new path). Same proxy, same upstream,
 * one process each; sequential keep-alive requests, alternating blocks so both see the same noise.
 *
 *   node bench/agent-network-path.ts        # REQUESTS=3000
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeploymentProxy } from '../agent/proxy.ts';

const requests = Number(process.env.REQUESTS ?? 3000);
const upstream = createServer((_req, res) => res.end('{"ok":true}'));
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve()));
const port = (upstream.address() as AddressInfo).port;
const socketPath = join(mkdtempSync(join(tmpdir(), 'cp-bench-relay-')), 'server.sock');
const relay = spawn(process.execPath, [new URL('../agent/sandbox-relay.mjs', import.meta.url).pathname, socketPath, String(port)], { stdio: 'inherit' });
while (!existsSync(socketPath)) await new Promise((r) => setTimeout(r, 20));
const proxy = new DeploymentProxy();
const proxyPort = await proxy.listen(0, '127.0.0.1');
proxy.route({ deploymentId: 'port', hosts: ['port'], upstream: { port } });
proxy.route({ deploymentId: 'socket', hosts: ['socket'], upstream: { socketPath } });

const agent = new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 1 });
const once = (host: string) =>
  new Promise<number>((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = request({ host: '127.0.0.1', port: proxyPort, path: '/ok', agent, headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve(Number(process.hrtime.bigint() - started) / 1e6));
    });
    req.on('error', reject);
    req.end();
  });
const times: Record<string, number[]> = { port: [], socket: [] };
for (let i = 0; i < 200; i += 1) for (const host of ['port', 'socket']) await once(host);
for (let block = 0; block < requests / 100; block += 1)
  for (const host of ['port', 'socket']) for (let i = 0; i < 100; i += 1) times[host]!.push(await once(host));
const pct = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * p)]!;
const row = (host: string) =>
  `| ${host === 'port' ? 'loopback port (before)' : 'relay on a unix socket (now)'} | ${pct(times[host]!, 0.5).toFixed(3)} | ${pct(times[host]!, 0.99).toFixed(3)} |`;
console.log(`| path | p50 ms | p99 ms |\n|---|---|---|\n${row('port')}\n${row('socket')}`);
console.log(
  `added at p50: ${(pct(times.socket!, 0.5) - pct(times.port!, 0.5)).toFixed(3)} ms; ratio p50 ${(pct(times.socket!, 0.5) / pct(times.port!, 0.5)).toFixed(2)}`,
);
relay.kill();
agent.destroy();
await proxy.close({ idleGraceMs: 0 });
upstream.close();
