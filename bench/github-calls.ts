/**
 * GitHub calls and time per push (contract §19): a real server process (SQLite file, sandbox data
 * plane) against the GitHub stand-in of test/github (simulated, held to GitHub's OpenAPI).
 *
 * 1. One build_on_push deployment per mode (commit statuses; check runs, where the installation
 *    grants `checks: write`), pushed PUSHES times one after the other; each push waits until its
 *    revision is DEPLOYED and the status outbox is empty. Per mode: the requests the server made to
 *    the stand-in per push, and the time from the push delivery to the last GitHub call of that
 *    push. The first push of each deployment is left out (it mints the tokens and reads the
 *    installation's permissions, once per hour). PUSHES stays under the pace (80 writes a minute
 *    per installation), so this is the time of the calls, not of the pace.
 * 2. A burst: one push to a repository with BURST build_on_push deployments (a push builds every
 *    deployment of its repository), in commit statuses mode: the calls it makes and how long until
 *    the last one lands. Past 80 calls the installation's pace (80 a minute) sets the time, so
 *    fewer calls per revision show as time here.
 * Run: `node bench/github-calls.ts` (`--pushes=N`, default 6; `--burst=N`, default 20).
 */

import { linkThroughSetup } from '../test/github/link.ts';
import { serverSql } from '../test/github/sql.ts';
import { GithubStandIn } from '../test/github/stand-in.ts';
import { apiClient, eventually } from '../test/helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../test/helpers/fixtures.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { deliver, pushPayload, revisionsOf, sha } from '../test/webhooks/github.ts';

const option = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const PUSHES = option('pushes', 6);
const BURST = option('burst', 20);
const SECRET = 'bench-github-calls';
const WITH_CHECKS = { contents: 'read', metadata: 'read', deployments: 'write', statuses: 'write', checks: 'write', pull_requests: 'read' };

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const p90 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * 0.9))]!;

async function main(): Promise<void> {
  const github = await new GithubStandIn().start();
  const plain = github.install({ login: 'acme', id: 501, type: 'Organization' }, ['acme/plain'], ['alice']);
  const checked = github.install({ login: 'bcme', id: 502, type: 'Organization' }, ['bcme/checked'], ['alice'], WITH_CHECKS);
  const server = await startServerProcess({ ...github.serverEnv(), GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0' });
  const api = apiClient(server.url, server.apiKey);
  const sql = serverSql(server);
  const outboxEmpty = () =>
    eventually(
      async () =>
        Number((await sql.all<{ n: number | string }>('SELECT count(*) AS n FROM github_outbox WHERE done_at IS NULL'))[0]!.n) === 0 ? true : undefined,
      600_000,
      20,
    );
  try {
    const rows: string[] = [];
    for (const [mode, installation, repo] of [
      ['commit statuses', plain, 'acme/plain'],
      ['check runs', checked, 'bcme/checked'],
    ] as const) {
      const integrationId = await linkThroughSetup(server.url, api, github, installation, 'alice', repo.split('/')[0]);
      const repoUrl = `${github.url}/${repo}`;
      const created = await api.post(
        '/v2/deployments',
        githubBody(uniqueName('calls'), integrationId, {
          source_config: { integration_id: integrationId, repo_url: repoUrl, deployment_type: 'dev', build_on_push: true },
          source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
        }),
      );
      if (created.status !== 201) throw new Error(JSON.stringify(created.body));
      await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED'], 60_000);
      await outboxEmpty();
      const calls: number[] = [];
      const times: number[] = [];
      let kinds: string[] = [];
      for (let push = 0; push <= PUSHES; push++) {
        const before = github.exchanges.length;
        const after = sha();
        const started = performance.now();
        const delivered = await deliver(server.url, 'push', pushPayload({ repo, after, htmlUrl: repoUrl, installationId: installation }), { secret: SECRET });
        if (delivered.status !== 202) throw new Error(`push: ${delivered.status}`);
        const revision = await eventually(
          async () => (await revisionsOf(api, created.body.id)).find((r) => r.source_revision_config.repo_commit_sha === after),
          60_000,
          20,
        );
        await revisionReaches(api, created.body.id, revision.id, ['DEPLOYED'], 60_000);
        await outboxEmpty();
        // The stand-in's own clock of the last call, not when the poll noticed the empty outbox.
        const exchanges = github.exchanges.slice(before);
        if (push === 0) continue;
        calls.push(exchanges.length);
        times.push((exchanges.at(-1)?.atMs ?? performance.now()) - started);
        kinds = exchanges.map((e) => `${e.method} ${e.template}`);
      }
      rows.push(
        `| ${mode} | ${median(calls)} (min ${Math.min(...calls)}, max ${Math.max(...calls)}) | ${median(times).toFixed(0)} ms | ${p90(times).toFixed(0)} ms |`,
      );
      console.log(`${mode}, the last push's calls:\n  ${kinds.join('\n  ')}`);
    }
    console.log(`\n${PUSHES} pushes per mode (after a first one that mints tokens)\n`);
    console.log('| mode | GitHub calls per push (median) | push to last call, median | p90 |');
    console.log('|---|---|---|---|');
    for (const row of rows) console.log(row);

    // The burst: BURST deployments of one repository, built by one push.
    const burst = github.install({ login: 'ccme', id: 503, type: 'Organization' }, ['ccme/burst'], ['alice']);
    const integrationId = await linkThroughSetup(server.url, api, github, burst, 'alice', 'ccme');
    const repoUrl = `${github.url}/ccme/burst`;
    const deployments: string[] = [];
    for (let i = 0; i < BURST; i++) {
      const created = await api.post(
        '/v2/deployments',
        githubBody(uniqueName('burst'), integrationId, {
          source_config: { integration_id: integrationId, repo_url: repoUrl, deployment_type: 'dev', build_on_push: true },
          source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
        }),
      );
      if (created.status !== 201) throw new Error(JSON.stringify(created.body));
      deployments.push(created.body.id);
    }
    // The creations' own calls land first, and the pace's minute passes, so the push starts with a fresh window.
    await outboxEmpty();
    await new Promise((resolve) => setTimeout(resolve, 61_000));
    const before = github.exchanges.length;
    const after = sha();
    const started = performance.now();
    const delivered = await deliver(server.url, 'push', pushPayload({ repo: 'ccme/burst', after, htmlUrl: repoUrl, installationId: burst }), {
      secret: SECRET,
    });
    if (delivered.status !== 202) throw new Error(`push: ${delivered.status}`);
    await eventually(
      async () => {
        for (const id of deployments)
          if (!(await revisionsOf(api, id)).some((r) => r.source_revision_config.repo_commit_sha === after && r.status === 'DEPLOYED')) return undefined;
        return true;
      },
      300_000,
      200,
    );
    await outboxEmpty();
    const exchanges = github.exchanges.slice(before);
    console.log(`\nA burst: one push building ${BURST} deployments (commit statuses)\n`);
    console.log('| GitHub calls | push to last call |');
    console.log('|---|---|');
    console.log(`| ${exchanges.length} | ${(((exchanges.at(-1)?.atMs ?? performance.now()) - started) / 1000).toFixed(1)} s |`);
    const byKind = new Map<string, number>();
    for (const e of exchanges) byKind.set(`${e.method} ${e.template}`, (byKind.get(`${e.method} ${e.template}`) ?? 0) + 1);
    for (const [kind, count] of byKind) console.log(`  ${count} × ${kind}`);
    if (github.problems().length > 0) console.log('problems:', github.problems());
  } finally {
    await sql.close();
    await server.kill('SIGTERM');
    await github.stop();
  }
}

await main();
