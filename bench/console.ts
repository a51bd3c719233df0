/**
 * The web console's costs (contract section 16), on the bundled server (`npm start`'s) over SQLite:
 *
 * - server time to render the deployments page with 10,000 deployments (first page, a filtered
 *   page, the last page) and a deployment page with 1,000 revisions (goal: p50 ≤ 20 ms; pages are
 *   paginated), measured as sequential requests on one keep-alive loopback connection;
 * - the live memory held by 1,000 open live pages (server-sent event streams, each watching its own
 *   deployment; goal ≤ 50 MB), read through the inspector after a full collection, and the CPU the
 *   server spends meanwhile on their once-a-second checks.
 *
 * `npm run bench:console` (`-- --requests=200`).
 */
import { request } from 'node:http';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, revisionReaches, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { INSPECT, inspectorUrl, liveHeap } from './lib/live-heap.ts';
import { cpuMs, removeTempDirs, sleep } from './lib/processes.ts';
import { seedDatabase } from './lib/seed.ts';
import { API_KEY, settingsFrom, startControlPlane } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const REQUESTS = Number(arg('requests') ?? 200);
const LIVE_PAGES = Number(arg('pages') ?? 1000);
const settings = settingsFrom([]);

try {
  // A template deployment made through the API (its secrets are real ciphertext), then the seed.
  let child = await startControlPlane(settings, { stageMs: 5 });
  const api = apiClient(child.url, API_KEY);
  const fx = await workspaceFixtures(api);
  const template = await api.post('/v2/deployments', githubBody('template', fx.integrationId, { secrets: [{ name: 'TOKEN', value: 'bench-secret' }] }));
  await revisionReaches(api, template.body.id, template.body.latest_revision_id, ['DEPLOYED']);
  await child.stop();
  const many = seedDatabase(child.databasePath, { templateId: template.body.id, deployments: 9_998, revisionsEach: 1, sample: LIVE_PAGES });
  const deep = seedDatabase(child.databasePath, {
    templateId: template.body.id,
    deployments: 1,
    revisionsEach: 1_000,
    sample: 1,
    name: () => 'one-thousand-revisions',
  });
  child = await startControlPlane(settings, { databasePath: child.databasePath, env: INSPECT });
  const inspector = inspectorUrl(child.output());
  const cookie = await signIn(child.url);

  const deepId = deep.deploymentIds[0]!;
  const pages: Array<[string, string]> = [
    ['deployments, first page (10,000 deployments)', '/console'],
    ['deployments, filtered by name', '/console?name_contains=seed-99'],
    ['deployments, last page', '/console?offset=9980'],
    ['deployment with 1,000 revisions', `/console/deployments/${deepId}`],
    ['its revisions, page 25', `/console/deployments/${deepId}?offset=480`],
  ];
  // The API's answers of the same lists, in the same run: the machine's load shows in both, so
  // the ratio is the console's own cost (a shared machine: the absolute figures move with it).
  const baselines = new Map<string, string>([
    ['/console', '/v2/deployments?limit=21'],
    ['/console?name_contains=seed-99', '/v2/deployments?limit=21&name_contains=seed-99'],
    ['/console?offset=9980', '/v2/deployments?limit=21&offset=9980'],
    [`/console/deployments/${deepId}`, `/v2/deployments/${deepId}/revisions?limit=21`],
    [`/console/deployments/${deepId}?offset=480`, `/v2/deployments/${deepId}/revisions?limit=21&offset=480`],
  ]);
  const rows: string[] = [];
  for (const [name, path] of pages) {
    const times = await timeRequests(child.url, path, { cookie }, REQUESTS);
    const api = await timeRequests(child.url, baselines.get(path)!, { 'x-api-key': API_KEY }, REQUESTS);
    const p50 = quantile(times, 0.5);
    const apiP50 = quantile(api, 0.5);
    rows.push(
      `| ${name} | \`${path.replace(deepId, '{id}')}\` | ${ms(p50)} | ${ms(quantile(times, 0.99))} | ${ms(apiP50)} | ${(p50 / apiP50).toFixed(2)}× | ${p50 <= 20 ? 'met' : 'MISSED'} |`,
    );
  }

  // 1,000 open live pages, each its own deployment (the costlier case: one check per page per tick).
  const before = await liveHeap(inspector);
  const streams = await Promise.all(many.deploymentIds.slice(0, LIVE_PAGES).map((id) => openLive(child.url, cookie, id)));
  await sleep(3000);
  const held = await liveHeap(inspector);
  const cpuBefore = cpuMs(child.pid);
  await sleep(10_000);
  const cpuWhileHeld = (cpuMs(child.pid) - cpuBefore) / 10_000;
  const heldBytes = held.totalBytes - before.totalBytes;
  for (const stream of streams) stream.destroy();
  await child.stop();

  console.log(`\n| page | path | p50 | p99 | the API's same list, p50 | page / API | goal p50 ≤ 20 ms |\n|---|---|---|---|---|---|---|\n${rows.join('\n')}`);
  console.log(
    `\n${streams.length} open live pages: ${(heldBytes / 1e6).toFixed(1)} MB live memory held (${(heldBytes / streams.length / 1024).toFixed(1)} KiB a page; goal ≤ 50 MB: ${heldBytes <= 50e6 ? 'met' : 'MISSED'}); the server's CPU while they were open and idle: ${(cpuWhileHeld * 100).toFixed(1)}% of one core`,
  );
} finally {
  removeTempDirs();
}

/** Signs in as a browser would; answers the session cookie. */
async function signIn(base: string): Promise<string> {
  const form = await fetch(`${base}/console/sign-in`);
  const signInCookie = form.headers
    .getSetCookie()
    .map((line) => line.split(';')[0])
    .join('; ');
  const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())![1]!;
  const answer = await fetch(`${base}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: signInCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ key: API_KEY, csrf }),
  });
  const session = answer.headers.getSetCookie().find((line) => line.startsWith('console_session='));
  if (!session) throw new Error(`sign-in failed: ${answer.status}`);
  return session.split(';')[0]!;
}

/** Milliseconds of each of `n` sequential GETs (after 20 unmeasured), each read to its end. */
async function timeRequests(base: string, path: string, headers: Record<string, string>, n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n + 20; i += 1) {
    const started = performance.now();
    const answer = await fetch(base + path, { headers });
    const text = await answer.text();
    if (answer.status !== 200 || text.length < 20) throw new Error(`${path}: ${answer.status}`);
    if (i >= 20) times.push(performance.now() - started);
  }
  return times;
}

/** An open live page's event stream; resolves once the server has answered its headers. */
function openLive(base: string, cookie: string, deploymentId: string): Promise<import('node:http').ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/console/live?deployment_id=${deploymentId}&since=`, { headers: { cookie }, agent: false }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`live: ${res.statusCode}`));
      res.on('data', () => {});
      resolve(req);
    });
    req.on('error', reject);
    req.end();
  });
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function ms(value: number): string {
  return `${value.toFixed(1)} ms`;
}
