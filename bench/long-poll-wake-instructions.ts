/**
 * `node bench/long-poll-wake-instructions.ts [waiters] [--rounds=N] [--window=answers]`: the long-poll's wake-up alone,
 * in a process small enough to run under callgrind on a loaded machine (the whole app under
 * valgrind, bench/profile-long-poll.ts, takes most of an hour there). The GET revision fast lane
 * (`revisionFastPath`, with the real `Revisions`, `RevisionWatch` and `Metrics`; a key check and a
 * store that answer one record) holds `waiters` conditional long-polls on a loopback port, held by
 * the C holder (bench/native/loadgen.c) in processes of their own; a change is announced with its
 * record (`watch.notify`, as the interrupt does), answering every one. A bare node:http server in
 * the same process holds as many and answers them the same bytes in one loop (the same body, the
 * same five headers, a request id each: bench/baselines/http-fixed.mjs's release). They alternate,
 * after a warm-up round of each. Each wake-up is bracketed by `os.loadavg()` and `os.uptime()`, so
 *   valgrind --tool=callgrind --smc-check=all-non-file --zero-before=uv_loadavg --dump-before=uv_uptime \
 *     --callgrind-out-file=DIR/cg.%p node --single-threaded bench/long-poll-wake-instructions.ts
 * writes one dump per wake-up (`summary:` is its instruction count), in the order this prints.
 * Without valgrind it prints each wake-up's CPU time (noisy on a shared machine). `--window=answers`
 * ends each window at the last answer written (`end` of the last response) instead of when the
 * wake-up returns, leaving out what either side does after its last answer (the server's
 * bookkeeping pass, docs/decisions/long-poll-wake-up.md round 3): how long the last client waits.
 */

import { createServer, ServerResponse } from 'node:http';
import { loadavg, uptime } from 'node:os';
import { Revisions, revisionEtag } from '../server/domain/revisions.ts';
import { revisionJson } from '../server/http/revision-answer.ts';
import { revisionFastPath } from '../server/http/revision-fast-lane.ts';
import { RevisionWatch } from '../server/lib/revision-watch.ts';
import { Metrics } from '../server/metrics.ts';
import type { RevisionRecord } from '../server/store/types.ts';
import { bareHoldingServer } from './lib/bare-holding-server.ts';
import { holdNative, nativeLoadgen, nativeLoadgenMissing } from './lib/native.ts';

const waiters = Number(process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 1000);
const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice('--rounds='.length) ?? 4);
if (!nativeLoadgen()) throw new Error(`this bench needs the C holder: ${nativeLoadgenMissing}`);
const HOLDERS = 2;

const DEPLOYMENT = '0b7e7f58-3a5c-4a8f-8d0b-5f6f3f0e2c21';
const REVISION = '6f1c1b0e-6d0a-4a4e-9a55-2d3a0e0c6a11';
const PATH = `/v2/deployments/${DEPLOYMENT}/revisions/${REVISION}`;
/** A revision as the store reads it; each change makes a new record (as the interrupt's read back does). */
const record = (version: number, status: string): RevisionRecord =>
  ({
    id: REVISION,
    deployment_id: DEPLOYMENT,
    tenant_id: 'workspace',
    created_at: '2026-11-22T10:00:00.000Z',
    updated_at: new Date(Date.parse('2026-11-22T10:00:03.000Z') + version).toISOString(),
    status,
    status_message: status === 'INTERRUPTED' ? 'Interrupted at the request of an API client.' : null,
    source: 'github',
    source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null, repo_commit_sha: null },
    trigger: 'create',
    version,
  }) as unknown as RevisionRecord;

let current = record(1, 'BUILDING');
const watch = new RevisionWatch();
const store = { getRevision: async () => current, getDeployment: async () => ({ id: DEPLOYMENT }) };
const revisions = new Revisions({ store: store as never, watch });
const metrics = new Metrics({ latest: () => undefined } as never);
const auth = { cachedPrincipal: (key: string | undefined) => (key === 'bench-key' ? { workspaceId: 'workspace' } : undefined) };
const lane = revisionFastPath({ auth, revisions, metrics } as never, (_req, res) => {
  res.writeHead(500);
  res.end();
});
const server = createServer(lane);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

// The bare server: held responses answered, on release, with the server's bytes.
const { server: bare, held, release } = await bareHoldingServer();

const portOf = (s: typeof server) => (s.address() as { port: number }).port;
const holdAll = async (url: string, etag: string) => {
  const headers = { 'x-api-key': 'bench-key', 'if-none-match': etag, prefer: 'wait=60' };
  const holders = Array.from({ length: HOLDERS }, (_, i) => holdNative(url, headers, Math.floor(waiters / HOLDERS) + (i < waiters % HOLDERS ? 1 : 0)));
  await Promise.all(holders.map((h) => h.connected));
  return Promise.all(holders.map((h) => h.answers)).then((all) => ({
    statuses: all.flatMap((a) => a.statuses),
    bodies: [...new Set(all.flatMap((a) => a.bodies))],
  }));
};
/** Waits for every waiter to be held; they wait 60 s at most, so a slower start (under valgrind, say) would never see them all. */
const until = async (done: () => boolean) => {
  const by = Date.now() + 50_000;
  while (!done()) {
    if (Date.now() > by) throw new Error('the waiters were not all held within 50 s: hold fewer (under valgrind, 200 or so)');
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 300));
};
const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};

/**
 * With `--window=answers`, the window ends at the last answer written: every response's `end` (the
 * server's and the bare one's alike) counts down the answers the window waits for, and the last
 * one closes it (`uptime()`, the dump) and takes the CPU time. Otherwise it ends when the wake-up returns.
 */
const toLastAnswer = process.argv.includes('--window=answers');
let answersLeft = 0;
let windowCpu: NodeJS.CpuUsage = { user: 0, system: 0 };
let cpuAtLastAnswer = 0;
if (toLastAnswer) {
  const end = ServerResponse.prototype.end as (this: ServerResponse, ...args: unknown[]) => ServerResponse;
  ServerResponse.prototype.end = function (this: ServerResponse, ...args: unknown[]) {
    const result = end.apply(this, args);
    if (answersLeft > 0 && --answersLeft === 0) {
      uptime();
      cpuAtLastAnswer = cpuMs(windowCpu);
    }
    return result;
  } as ServerResponse['end'];
}
/** Opens a measured window; `close` ends it (unless the last answer did) and answers its CPU time. */
const measure = () => {
  answersLeft = toLastAnswer ? waiters : 0;
  windowCpu = process.cpuUsage();
  loadavg();
  return {
    close: () => {
      if (toLastAnswer) {
        if (answersLeft !== 0) throw new Error(`${answersLeft} answers were not written in the window`);
        return cpuAtLastAnswer;
      }
      uptime();
      return cpuMs(windowCpu);
    },
  };
};

/** One wake-up of the lane's waiters; answers its CPU time. */
async function ours(): Promise<number> {
  const answers = holdAll(`http://127.0.0.1:${portOf(server)}${PATH}`, revisionEtag(current));
  await until(() => watch.size >= waiters);
  const changed = record(current.version + 1, 'INTERRUPTED');
  const window = measure();
  current = changed;
  watch.notify(REVISION, changed);
  const used = window.close();
  const result = await answers;
  if (result.statuses.some((s) => s !== 200) || result.bodies.length !== 1 || result.bodies[0] !== revisionJson(changed))
    throw new Error('a waiter got another answer than the changed revision');
  current = record(current.version + 1, 'BUILDING');
  return used;
}

/** One release of the bare server's waiters (the body serialized once, as the server's is); answers its CPU time. */
async function floor(): Promise<number> {
  const changed = record(current.version + 1, 'INTERRUPTED');
  const answers = holdAll(`http://127.0.0.1:${portOf(bare)}/wait`, revisionEtag(current));
  await until(() => held.length >= waiters);
  const window = measure();
  release(revisionJson(changed), revisionEtag(changed));
  const used = window.close();
  const result = await answers;
  if (result.bodies.length !== 1 || result.bodies[0] !== revisionJson(changed)) throw new Error('the bare server answered other bytes');
  return used;
}

const order: string[] = [];
const figures = { server: [] as number[], bare: [] as number[] };
// Warm-up, not counted (but dumped: the first two dumps).
order.push('warm-up server', 'warm-up bare');
await ours();
await floor();
for (let round = 0; round < rounds; round += 1) {
  for (const who of round % 2 === 0 ? (['server', 'bare'] as const) : (['bare', 'server'] as const)) {
    order.push(who);
    figures[who].push(await (who === 'server' ? ours() : floor()));
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
console.log(
  `${waiters} waiters, ${rounds} rounds, ${toLastAnswer ? 'each window to the last answer written' : 'each window the whole wake-up'}; the dumps in order: ${order.join(', ')}`,
);
console.log(
  `CPU ms per wake-up (noisy): server ${median(figures.server).toFixed(1)} (${figures.server.map((x) => x.toFixed(1)).join(', ')}); bare ${median(figures.bare).toFixed(1)} (${figures.bare.map((x) => x.toFixed(1)).join(', ')})`,
);
server.close();
bare.close();
process.exit(0);
