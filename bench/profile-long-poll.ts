/**
 * `node --cpu-prof --cpu-prof-dir=DIR bench/profile-long-poll.ts [waiters] [--hono-only]`: the in-process app
 * on a loopback port holds `waiters` conditional long-polls on one revision, then interrupts it
 * and prints how long the interrupt took in the server (the waiters are answered before the
 * interrupt's own continuation runs, so this is the wake-up's server-side cost). The clients are
 * in this process too: read the profile by function, not as a whole.
 */

import { Agent, createServer, request, type ServerOptions } from 'node:http';
import { type ServerType, serve } from '@hono/node-server';
import { type NodeListener, revisionFastPath } from '../server/http/revision-fast-lane.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { inProcessApp } from '../test/helpers/in-process.ts';

const waiters = Number(process.argv[2] ?? 1000);
const t = await inProcessApp({ stageMs: 3_600_000 });
await workspaceFixtures(t.api);
const k8s = await t.api.post('/v2/listeners', { compute_type: 'k8s', compute_id: `k8s-${uniqueName()}` });
// A k8s listener's revision waits for its agent, which never comes: nothing but the interrupt moves it.
// (Such a deployment must carry the license key its image needs.)
const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), k8s.body.id, { secrets: [{ name: 'LANGSMITH_API_KEY', value: 'lsv2-profile' }] }));
if (k8s.status !== 201 || created.status !== 201)
  throw new Error(`set-up failed: listener ${k8s.status}, deployment ${created.status} ${JSON.stringify(created.body)}`);
const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
const etag = (await t.api.get(path)).headers.get('etag')!;
// As `startServer` wires it: the revision fast path in front of Hono (`--hono-only` leaves it out).
const withFastPath = ((options: ServerOptions, listener: NodeListener) => createServer(options, revisionFastPath(t.services, listener))) as typeof createServer;
const server = await new Promise<ServerType>((resolve) => {
  const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1', createServer: process.argv.includes('--hono-only') ? undefined : withFastPath }, () =>
    resolve(s),
  );
});
const port = (server.address() as { port: number }).port;
const agent = new Agent({ keepAlive: true, maxSockets: waiters });
let answered = 0;
let lastAt = 0;
const done = Array.from(
  { length: waiters },
  () =>
    new Promise<void>((resolve) => {
      request({ host: '127.0.0.1', port, path, agent, headers: { 'x-api-key': t.apiKey, 'if-none-match': etag, prefer: 'wait=60' } }, (res) => {
        // Anything but the interrupted revision means the set-up is wrong: say so rather than wait for waiters that never come.
        if (res.statusCode !== 200) {
          console.error(`a waiter was answered ${res.statusCode} before the interrupt`);
          process.exit(1);
        }
        res.resume();
        res.on('end', () => {
          answered += 1;
          lastAt = performance.now();
          resolve();
        });
      }).end();
    }),
);
while (t.services.watch.size < waiters) await new Promise((r) => setTimeout(r, 20));
const before = performance.now();
await t.api.post(`${path}/interrupt`);
const serverSide = performance.now() - before;
await Promise.all(done);
console.log(
  `${waiters} waiters: interrupt (the wake-up, server side) ${serverSide.toFixed(1)} ms; last answer received ${(lastAt - before).toFixed(1)} ms after the interrupt was sent (${answered} answered)`,
);
agent.destroy();
server.close();
t.close();
