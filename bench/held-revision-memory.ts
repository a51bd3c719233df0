/**
 * `node bench/held-revision-memory.ts [--root=<other checkout>] [--seconds=8]`: the live memory a
 * revision in progress costs the server while the sandbox holds it at BUILDING (stages of an hour,
 * as in the hot-paths scenario, whose POST rounds leave some 60,000 of them in the server its paced
 * GET rows then measure). POSTs creates for a few seconds, then reads the live heap through the
 * inspector after a full collection (`bench/lib/live-heap.ts`) and divides the growth by the
 * creates; with `--root`, the same for another checkout's bundle (built here), one after the other.
 */
import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { INSPECT, inspectorUrl, liveHeap } from './lib/live-heap.ts';
import { runLoad } from './lib/load.ts';
import { removeTempDirs, sleep } from './lib/processes.ts';
import { API_KEY, settingsFrom, startControlPlane } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const other = arg('root') === undefined ? undefined : resolve(arg('root')!);
const seconds = Number(arg('seconds') ?? 8);

if (other) execFileSync(process.execPath, [join(other, 'server/build.ts')], { cwd: other, stdio: 'inherit' });
try {
  for (const root of other ? [undefined, other] : [undefined]) {
    const child = await startControlPlane(settingsFrom([]), { env: INSPECT, root });
    try {
      const inspector = inspectorUrl(child.output());
      const api = apiClient(child.url, API_KEY);
      const fx = await workspaceFixtures(api);
      const before = await liveHeap(inspector);
      let n = 0;
      const body = () => JSON.stringify(githubBody(`held-${n++}`, fx.integrationId));
      const load = await runLoad(child.url, {
        connections: 32,
        seconds,
        requests: [{ method: 'POST', path: '/v2/deployments', headers: { 'x-api-key': API_KEY }, body }],
      });
      if (load.failures > 0) throw new Error(`${load.failures} creates failed`);
      // Each create's revision is handed to the sandbox on the turn after its answer.
      await sleep(1000);
      const after = await liveHeap(inspector);
      const held = load.requests;
      const grown = after.totalBytes - before.totalBytes;
      console.log(
        `${root ?? 'this checkout'}: ${held} revisions held at BUILDING; live memory +${(grown / 1e6).toFixed(1)} MB, ${Math.round(grown / held)} bytes a revision`,
      );
    } finally {
      await child.stop();
    }
  }
} finally {
  removeTempDirs();
}
