/**
 * `node bench/profile-get-revision.ts [seconds] [post]`: profiles the real bundled server under
 * autocannon on GET revision (the Action's hot path), or on POST deployment with `post`, and
 * prints the top functions by self time.
 * The `.cpuprofile` stays in a temp directory (its path is printed) for a closer look.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { bundleServer } from '../server/build.ts';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { runLoad } from './lib/load.ts';
import { ROOT } from './lib/processes.ts';

type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number };

const seconds = Number(process.argv[2] ?? 8);
const dir = mkdtempSync(join(tmpdir(), 'cp-profile-'));
const key = `profile-key-${randomBytes(12).toString('hex')}`;
await bundleServer();
const child = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, resolve(ROOT, 'server/dist/main.js')], {
  env: {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: join(dir, 'cp.db'),
    BOOTSTRAP_API_KEY: key,
    ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'info',
    SANDBOX_STAGE_MS: '3600000',
  },
  stdio: ['ignore', 'ignore', 'pipe'],
});
const url = await new Promise<string>((done) => {
  let out = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    const port = /"msg":"listening".*?"port":(\d+)/.exec(out);
    if (port) done(`http://127.0.0.1:${port[1]}`);
  });
});
const api = apiClient(url, key);
const fx = await workspaceFixtures(api);
const paths: string[] = [];
for (let i = 0; i < 20; i += 1) {
  const created = await api.post('/v2/deployments', githubBody(`profile-${i}-${Date.now()}`, fx.integrationId));
  paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
}
const post = process.argv[3] === 'post';
let n = 0;
const requests = post
  ? [
      {
        method: 'POST' as const,
        path: '/v2/deployments',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: () => JSON.stringify(githubBody(`profile-post-${n++}-${Date.now()}`, fx.integrationId)),
      },
    ]
  : paths.map((path) => ({ method: 'GET' as const, path, headers: { 'x-api-key': key } }));
const result = await runLoad(url, { connections: 32, seconds, requests });
console.log(`${post ? 'POST deployment' : 'GET revision'}: ${Math.round(result.rps)} req/s under the profiler (${result.failures} failures)`);
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
if (!file) throw new Error('no profile written');
const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { nodes: Node[]; samples: number[] };
const total = profile.samples.length;
const self = new Map<string, number>();
for (const node of profile.nodes) {
  const where = `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/server\/dist\//, 'dist/')}:${node.callFrame.lineNumber + 1}`;
  self.set(where, (self.get(where) ?? 0) + (node.hitCount ?? 0));
}
console.log(`profile: ${join(dir, file)} (${total} samples)`);
for (const [where, hits] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${((hits / total) * 100).toFixed(1).padStart(5)}%  ${where}`);
