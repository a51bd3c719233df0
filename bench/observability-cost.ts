/**
 * What the operator's view costs on the hot paths (contract §17, issue 37's goal: tracing off ≤ 2%
 * slower, on ≤ 10%, and the audit row's cost on a create), in one process and one run:
 *
 *   node bench/observability-cost.ts --before=/path/to/a/checkout/without/them [--before=…]
 *
 * The cases, real servers in this process (loopback ports, SQLite files of their own):
 * - `without`: this tree composed from its own modules without the observability layer (metrics,
 *   request ids and the log scope, tracing hooks; bench/lib/unobserved-server.ts), the audit
 *   trail kept; `off-c` and `on-c`: the same composition with the layer, tracing off and on. So
 *   `off-c ÷ without` and `on-c ÷ without` are the layer's cost alone, the headline figures.
 * - `off` and `on`: this tree's real `startServer`, tracing off and on; `off ÷ off-c` checks that
 *   the bench's composition adds nothing of its own.
 * - each `--before`: another checkout's `startServer` (e.g. `git archive 22111d1 | tar -x -C dir`,
 *   with `node_modules` linked in: the tree before §17, which lacks much more than the layer —
 *   the audit row, outgoing-event triggers, the console — so `off ÷ before` is the second column,
 *   not the layer's cost; a copy of this tree gives the noise floor).
 * Tracing on exports to a stand-in collector on loopback that takes every export (as a collector's
 * OTLP receiver does). Each round runs every case once on each server, one request at a time, the
 * servers taking turns going first. A figure is the median over the rounds of µs per request; a
 * ratio the median of the per-round ratios with its quartiles, which holds on a busy machine
 * better than figures. The audit row's own cost on a create is measured at the store: the same
 * create with and without an audit entry pending in its request scope.
 */

import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const befores = process.argv.filter((arg) => arg.startsWith('--before=')).map((arg) => arg.slice('--before='.length));
const CALLS = 400;
const ROUNDS = Number(process.env.ROUNDS ?? 21);

/** A stand-in OTLP/HTTP collector on loopback: reads each export whole and answers 200, keeping nothing. */
async function collectorSink(): Promise<{ url: string; exports: () => number; close: () => void }> {
  const { createServer } = await import('node:http');
  let exports = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, exports: () => exports, close: () => server.close() };
}

const collector = await collectorSink();
type Tree = { name: string; root: string; env?: Record<string, string>; composed?: { observed: boolean } };
const thisTree = resolve(import.meta.dirname, '..');
const tracingOn = { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'bench' };
const trees: Tree[] = [
  ...befores.map((root) => ({ name: basename(resolve(root)), root: resolve(root) })),
  { name: 'off', root: thisTree },
  { name: 'on', root: thisTree, env: tracingOn },
  { name: 'off-c', root: thisTree, composed: { observed: true } },
  { name: 'on-c', root: thisTree, env: tracingOn, composed: { observed: true } },
  { name: 'without', root: thisTree, composed: { observed: false } },
];
const index = (name: string) => trees.findIndex((t) => t.name === name);
/** The ratios printed: [numerator case, denominator case], per round. */
const comparisons: Array<[string, string]> = [
  ['off-c', 'without'],
  ['on-c', 'without'],
  ['on', 'off'],
  ['off', 'off-c'],
  ...befores.map((root): [string, string] => ['off', basename(resolve(root))]),
];

/** A real server of a checkout on a loopback port, with a deployment whose revision is read, on an SQLite file of its own. */
async function serverOf(tree: Tree) {
  const load = (path: string) => import(pathToFileURL(join(tree.root, path)).href);
  const { loadConfig } = await load('server/config.ts');
  const { startServer } = await load('server/server.ts');
  const { silentLogger } = await load('server/logger.ts');
  const { startComposedServer } = await import('./lib/unobserved-server.ts');
  const path = join(mkdtempSync(join(tmpdir(), `cp-observability-${tree.name}-`)), 'control-plane.db');
  const key = `bench-${randomBytes(16).toString('hex')}`;
  // Stages that never end during a round: the pipeline stays out of the figures.
  const config = loadConfig({
    PORT: '0',
    DATABASE_URL: path,
    BOOTSTRAP_API_KEY: key,
    SANDBOX_STAGE_MS: '3600000',
    SQLITE_SYNCHRONOUS: 'NORMAL',
    ...tree.env,
  });
  const server = tree.composed ? await startComposedServer(config, tree.composed.observed) : await startServer(config, { log: silentLogger, print: () => {} });
  const base = `http://127.0.0.1:${server.port}`;
  const headers = { 'x-api-key': key, 'content-type': 'application/json' };
  const listeners = (await (await fetch(`${base}/v2/listeners`, { headers })).json()) as { resources: Array<{ id: string }> };
  const listenerId = listeners.resources[0]!.id;
  let n = 0;
  const create = async () => {
    const body = JSON.stringify({
      name: `bench-${tree.name}-${n++}`,
      source: 'external_docker',
      source_config: { listener_id: listenerId },
      source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
      secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-bench' }],
    });
    const response = await fetch(`${base}/v2/deployments`, { method: 'POST', headers, body });
    if (response.status !== 201) throw new Error(`create: ${response.status} ${await response.text()}`);
    return (await response.json()) as { id: string; latest_revision_id: string };
  };
  const first = await create();
  const revisionUrl = `${base}/v2/deployments/${first.id}/revisions/${first.latest_revision_id}`;
  const getRevision = async () => {
    const response = await fetch(revisionUrl, { headers });
    if (response.status !== 200) throw new Error(`get: ${response.status}`);
    await response.arrayBuffer();
  };
  return { create, getRevision, close: () => server.close() };
}

/** µs per call of `work`, run `CALLS` times one after another. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) await work();
  return ((performance.now() - started) * 1000) / CALLS;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** The store's create with and without an audit entry pending (the row it adds to the create's commit). */
async function auditRowCost(): Promise<{ without: number; with: number; ratios: number[] }> {
  const root = thisTree;
  const load = (path: string) => import(pathToFileURL(join(root, path)).href);
  const { openSqliteStore } = await load('server/store/sqlite.ts');
  const { SecretBox } = await load('server/crypto/secret-box.ts');
  const { DOMAIN_STORE_RULES } = await load('server/domain/store-rules.ts');
  const { runInRequestScope } = await load('server/lib/request-scope.ts');
  const path = join(mkdtempSync(join(tmpdir(), 'cp-audit-row-')), 'control-plane.db');
  const store = openSqliteStore({ path, secretBox: new SecretBox(randomBytes(32)), synchronous: 'NORMAL', rules: DOMAIN_STORE_RULES });
  const boot = await store.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: new Date().toISOString() });
  const now = new Date().toISOString();
  const input = () => {
    const id = crypto.randomUUID();
    return {
      deployment: {
        id,
        tenant_id: boot.workspaceId,
        name: `audit-${id}`,
        source: 'external_docker',
        source_config: { listener_id: null },
        source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
        secrets: [],
        status: 'READY',
        latest_revision_id: null,
        active_revision_id: null,
        image_version: null,
        created_at: now,
        updated_at: now,
      },
      revision: null,
      tracingProject: { id: crypto.randomUUID(), name: `audit-${id}`, tenant_id: boot.workspaceId, deployment_id: id, created_at: now },
    };
  };
  const entry = (id: string) => ({
    id,
    organization_id: boot.organizationId,
    workspace_id: boot.workspaceId,
    actor_kind: 'api_key',
    actor_id: crypto.randomUUID(),
    actor_scope: 'organization',
    address: '127.0.0.1',
    user_agent: 'bench',
    action: 'create',
    resource_type: 'deployment',
    resource_id: id,
    route: 'POST /v2/deployments',
    fields: ['name', 'source', 'source_config.listener_id', 'source_revision_config.image_uri', 'secrets'],
    outcome: 'succeeded',
    status: null,
    request_id: id,
    created_at: now,
  });
  const plain = () => store.createDeployment(input());
  const audited = () => {
    const id = crypto.randomUUID();
    return runInRequestScope({ requestId: id, audit: { entry: entry(id), state: 'pending', subjectNamed: true } }, () => store.createDeployment(input()));
  };
  const withouts: number[] = [];
  const withs: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Each goes first in every other round, so what the first leaves behind (garbage, cache) is shared.
    let a: number;
    let b: number;
    if (round % 2 === 0) {
      a = await timed(plain);
      b = await timed(audited);
    } else {
      b = await timed(audited);
      a = await timed(plain);
    }
    withouts.push(a);
    withs.push(b);
    ratios.push(b / a);
  }
  return { without: median(withouts), with: median(withs), ratios };
}

/**
 * One request span's own cost, exported: per round, a tracer to the collector, `CALLS` request
 * spans started and ended, then its shutdown (which exports them all); µs per span. What a POST
 * pays with tracing on (a create makes one span), measured without the noise of the request.
 */
async function spanCost(): Promise<number> {
  const { startTracing } = await import(pathToFileURL(join(thisTree, 'server/tracing.ts')).href);
  const perSpan: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const tracing = await startTracing(collector.url, 'bench');
    const started = performance.now();
    for (let i = 0; i < CALLS; i++) tracing.startRequest('POST', undefined).end('/v2/deployments', 201);
    await tracing.shutdown();
    perSpan.push(((performance.now() - started) * 1000) / CALLS);
  }
  return median(perSpan);
}

const apps = await Promise.all(trees.map(serverOf));
const figures = { get: trees.map((): number[] => []), post: trees.map((): number[] => []) };
/**
 * The process's CPU time per request (user + system, µs): client and servers share this process,
 * so the client's part (the same for every case) dilutes the ratios, but a loaded machine moves
 * it far less than wall time. Printed beside the wall-time ratios, for runs on a shared machine.
 */
const cpu = { get: trees.map((): number[] => []), post: trees.map((): number[] => []) };
const cpuMicros = () => {
  const used = process.cpuUsage();
  return used.user + used.system;
};
/** `timed`, with the process's CPU time per call into `into`. */
async function timedWithCpu(work: () => Promise<unknown>, into: number[]): Promise<number> {
  const before = cpuMicros();
  const wall = await timed(work);
  into.push((cpuMicros() - before) / CALLS);
  return wall;
}
for (let round = 0; round < ROUNDS; round++) {
  // Each server goes first in turn, so what the first leaves behind (garbage, cache) is shared.
  const order = trees.map((_, i) => (i + round) % trees.length);
  for (const i of order) figures.get[i]!.push(await timedWithCpu(apps[i]!.getRevision, cpu.get[i]!));
  for (const i of order) figures.post[i]!.push(await timedWithCpu(apps[i]!.create, cpu.post[i]!));
}
for (const app of apps) await app.close();
const span = await spanCost();
const exported = collector.exports();
collector.close();
const audit = await auditRowCost();

const us = (values: number[]) => median(values).toFixed(1);
/** The median of per-round ratios, with the middle half of the rounds (quartiles) beside it: the spread on a shared machine. */
const ratio = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(3);
  return `${median(values).toFixed(3)} (${at(0.25)}–${at(0.75)})`;
};
const perRound = (values: number[][], [top, bottom]: [string, string]) => values[index(top)]!.map((v, round) => v / values[index(bottom)]![round]!);
console.log(
  `${ROUNDS} rounds of ${CALLS} sequential requests each over loopback HTTP (fetch), SQLite synchronous=NORMAL; ${exported} OTLP exports received; ratios: median of per-round ratios (quartiles); load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} at the end\n`,
);
console.log(`| case | ${trees.map((t) => `${t.name} (µs)`).join(' | ')} |`);
console.log(`|---|${trees.map(() => '---|').join('')}`);
for (const [name, key] of [
  ['GET revision (the fast lane)', 'get'],
  ['POST deployment', 'post'],
] as const)
  console.log(`| ${name} | ${figures[key].map(us).join(' | ')} |`);
console.log(`\n| ratio | GET revision | POST deployment |\n|---|---|---|`);
for (const pair of comparisons) console.log(`| ${pair[0]} ÷ ${pair[1]} | ${ratio(perRound(figures.get, pair))} | ${ratio(perRound(figures.post, pair))} |`);
console.log(`\nThe same by the process's CPU time per request (client included, so diluted; steadier on a loaded machine):\n`);
console.log(`| case | ${trees.map((t) => `${t.name} (µs CPU)`).join(' | ')} |`);
console.log(`|---|${trees.map(() => '---|').join('')}`);
console.log(`| GET revision | ${cpu.get.map(us).join(' | ')} |\n| POST deployment | ${cpu.post.map(us).join(' | ')} |`);
console.log(`\n| ratio, CPU | GET revision | POST deployment |\n|---|---|---|`);
for (const pair of comparisons) console.log(`| ${pair[0]} ÷ ${pair[1]} | ${ratio(perRound(cpu.get, pair))} | ${ratio(perRound(cpu.post, pair))} |`);
console.log(`\nOne request span, started, ended and exported over OTLP/HTTP: ${span.toFixed(1)} µs`);
console.log(
  `\n| store create, audit row added | without ${audit.without.toFixed(1)} µs | with ${audit.with.toFixed(1)} µs | with / without ${ratio(audit.ratios)} |`,
);
process.exit(0);
