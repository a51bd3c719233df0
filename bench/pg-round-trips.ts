/**
 * `node bench/pg-round-trips.ts [--root=<other checkout>] [--rounds=2] [--seconds=3]`: what one
 * request sends to PostgreSQL under load: round trips and statements per GET revision and per POST
 * deployment, counted in the server process (bench/lib/count-pg-round-trips.mjs on node-postgres's
 * `Client.query`), over a closed-loop run of 32 connections on the embedded PostgreSQL (fsync on).
 * The servers run from source (the counting hook needs the pg of node_modules); `--root`: another
 * checkout's server too, each round running both in turn (its node_modules must resolve to this
 * checkout's pg, e.g. a symbolic link). Counts, not timings: they hold on a loaded machine; the
 * background sweeps' statements are included (a few per hundred requests).
 */
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { createTestDatabase, startTestPostgres } from '../test/helpers/postgres.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import { type Child, ROOT, sleep, startChild, tempDir } from './lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const roots = [ROOT, ...(arg('root') === undefined ? [] : [resolve(arg('root')!)])];
const rounds = Number(arg('rounds') ?? 2);
const seconds = Number(arg('seconds') ?? 3);
const hook = join(import.meta.dirname, 'lib/count-pg-round-trips.mjs');
const headers = { 'x-api-key': API_KEY };

type Server = { root: string; child: Child; countsFile: string; revisionPaths: string[]; integrationId: string };

const postgres = await startTestPostgres({ durable: true });
const servers: Server[] = [];
try {
  for (const root of roots) {
    const countsFile = join(tempDir('cp-pg-round-trips-'), 'counts.json');
    const child = await startChild(
      join(root, 'server/main.ts'),
      {
        DATABASE_URL: await createTestDatabase(postgres.adminUrl),
        BOOTSTRAP_API_KEY: API_KEY,
        ENCRYPTION_KEY,
        LOG_LEVEL: 'info',
        SANDBOX_STAGE_MS: '3600000',
        RECONCILE_INTERVAL_MS: '0',
        PG_ROUND_TRIPS_FILE: countsFile,
      },
      ['--import', hook],
    );
    const server: Server = { root, child, countsFile, revisionPaths: [], integrationId: '' };
    servers.push(server);
    const api = apiClient(child.url, API_KEY);
    server.integrationId = (await workspaceFixtures(api)).integrationId;
    for (let i = 0; i < 50; i += 1) {
      const created = await api.post('/v2/deployments', githubBody(`rt-warm-${i}`, server.integrationId));
      server.revisionPaths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
    }
  }
  /** The counts since the last call (the hook writes them on SIGUSR2). */
  const counts = async (server: Server) => {
    rmSync(server.countsFile, { force: true });
    process.kill(server.child.pid, 'SIGUSR2');
    for (let tries = 0; tries < 50; tries += 1) {
      await sleep(100);
      try {
        return JSON.parse(readFileSync(server.countsFile, 'utf8')) as { roundTrips: number; statements: number; responses: number };
      } catch {
        // Not written yet.
      }
    }
    throw new Error(`no counts from ${server.root}`);
  };
  let created = 0;
  const requests = (server: Server, op: 'get' | 'post'): LoadRequest[] =>
    op === 'get'
      ? server.revisionPaths.map((path) => ({ method: 'GET', path, headers }))
      : [{ method: 'POST', path: '/v2/deployments', headers, body: () => JSON.stringify(githubBody(`rt-${(created += 1)}`, server.integrationId)) }];
  for (let round = 0; round < rounds; round += 1) {
    for (const server of round % 2 === 0 ? servers : [...servers].reverse()) {
      for (const op of ['get', 'post'] as const) {
        await counts(server);
        const run = await runLoad(server.child.url, { connections: 32, seconds, requests: requests(server, op) });
        // The requests still in flight when the load stopped end, and are counted with what they sent.
        await sleep(1000);
        const { roundTrips, statements, responses } = await counts(server);
        console.log(
          `round ${round + 1} ${server.root} ${op.toUpperCase()}: ${responses} responses (${run.failures} failed), ` +
            `${(roundTrips / responses).toFixed(2)} round trips and ${(statements / responses).toFixed(2)} statements per request`,
        );
      }
    }
  }
} finally {
  for (const server of servers) await server.child.stop();
  await postgres.stop();
}
