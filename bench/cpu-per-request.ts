/**
 * `node bench/cpu-per-request.ts --root=<other checkout> [--rounds=3] [--seconds=4]`: the server's
 * own CPU time per request (utime + stime from /proc/<pid>/stat over a closed-loop run), this
 * checkout's bundled server against another's, interleaved round by round. CPU per request is far
 * less sensitive than req/s to other work on a shared machine, so it shows what a change saved
 * where the req/s ratios are noise. Both bundles are built first (`node server/build.ts` in each).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { runLoad } from './lib/load.ts';
import { cpuMs, ROOT, startChild, tempDir } from './lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const other = resolve(arg('root') ?? '');
const rounds = Number(arg('rounds') ?? 3);
const seconds = Number(arg('seconds') ?? 4);
for (const root of [ROOT, other]) execFileSync(process.execPath, [join(root, 'server/build.ts')], { cwd: root, stdio: 'inherit' });

async function measure(root: string): Promise<{ get: number; post: number; getRps: number; postRps: number }> {
  const server = await startChild(join(root, 'server/dist/main.js'), {
    DATABASE_URL: join(tempDir(), 'cp.db'),
    BOOTSTRAP_API_KEY: API_KEY,
    ENCRYPTION_KEY,
    LOG_LEVEL: 'info',
    SANDBOX_STAGE_MS: '3600000',
  });
  try {
    const api = apiClient(server.url, API_KEY);
    const fx = await workspaceFixtures(api);
    const paths: string[] = [];
    for (let i = 0; i < 50; i += 1) {
      const created = await api.post('/v2/deployments', githubBody(`cpu-${i}-${crypto.randomUUID().slice(0, 8)}`, fx.integrationId));
      paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
    }
    const headers = { 'x-api-key': API_KEY };
    await runLoad(server.url, { connections: 32, seconds: 1, requests: paths.map((path) => ({ method: 'GET' as const, path, headers })) });
    let before = cpuMs(server.pid);
    const get = await runLoad(server.url, { connections: 32, seconds, requests: paths.map((path) => ({ method: 'GET' as const, path, headers })) });
    const getCpu = cpuMs(server.pid) - before;
    before = cpuMs(server.pid);
    const post = await runLoad(server.url, {
      connections: 32,
      seconds,
      requests: [
        {
          method: 'POST',
          path: '/v2/deployments',
          headers: { ...headers, 'content-type': 'application/json' },
          body: () => JSON.stringify(githubBody(`cpu-post-${crypto.randomUUID()}`, fx.integrationId)),
        },
      ],
    });
    const postCpu = cpuMs(server.pid) - before;
    if (get.failures + post.failures > 0) throw new Error(`failures: ${get.failures} GET, ${post.failures} POST`);
    return { get: (getCpu * 1000) / get.requests, post: (postCpu * 1000) / post.requests, getRps: get.rps, postRps: post.rps };
  } finally {
    await server.stop();
  }
}

const rows: string[] = [];
for (let round = 1; round <= rounds; round += 1) {
  for (const [name, root] of [
    ['this', ROOT],
    ['other', other],
  ] as const) {
    const m = await measure(root);
    const line = `round ${round} ${name.padEnd(5)}: GET revision ${m.get.toFixed(0)} µs CPU/request (${Math.round(m.getRps)} req/s); POST deployment ${m.post.toFixed(0)} µs CPU/request (${Math.round(m.postRps)} req/s)`;
    console.log(line);
    rows.push(line);
  }
}
console.log(`this = ${ROOT}, other = ${other}; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
