import { afterAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { revisionReaches, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, pushPayload, revisionsOf, workspaceHook } from './github.ts';
import { localRemote } from './local-remote.ts';
import { pushDeployment } from './shared-setup.ts';

describe('the reconciler', () => {
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.kill('SIGKILL');
  });

  it('builds a commit pushed to a local bare repository with no webhook sent', async () => {
    const remote = localRemote();
    const first = remote.commit('First version');
    server = await startServerProcess({
      GITHUB_WEBHOOK_SECRET: 'reconciler-secret',
      RECONCILE_INTERVAL_MS: '200',
      SANDBOX_STAGE_MS: '50',
      ALLOW_FILE_REPO_URLS: 'true',
    });
    const api = apiClient(server.url, server.apiKey);
    const fx = await workspaceFixtures(api);
    const dep = await pushDeployment(api, fx.integrationId, remote.url);

    // The create revision built `main` as it was; the reconciler's first look records that head.
    await eventually(async () => (server!.output().includes(`"deployment_id":"${dep.id}","branch":"main","head":"${first}"`) ? true : undefined));
    const second = remote.commit('Second version, pushed with no webhook configured');

    const revision = await eventually(async () => (await revisionsOf(api, dep.id)).find((r) => r.trigger === 'push'));
    expect(revision.source_revision_config.repo_commit_sha).toBe(second);
    expect((await revisionReaches(api, dep.id, revision.id, ['DEPLOYED'])).status).toBe('DEPLOYED');

    // Several more passes (200 ms apart) see the head already built and add nothing; no revision was
    // ever made for the first commit.
    await new Promise((r) => setTimeout(r, 800));
    const pushes = (await revisionsOf(api, dep.id)).filter((r) => r.trigger === 'push');
    expect(pushes.map((r) => r.source_revision_config.repo_commit_sha)).toEqual([second]);
    const log = await api.get('/v1/webhooks/github/deliveries');
    expect(log.body.resources).toEqual([]);
  });

  it('does not build a head that a webhook skipped on purpose (a skip marker)', async () => {
    const remote = localRemote();
    const first = remote.commit('First version');
    // Passes 1.5 s apart: the delivery below has that long to arrive after a pass has seen its push.
    const own = await startServerProcess({
      GITHUB_WEBHOOK_SECRET: 'reconciler-secret',
      RECONCILE_INTERVAL_MS: '1500',
      SANDBOX_STAGE_MS: '50',
      ALLOW_FILE_REPO_URLS: 'true',
    });
    try {
      const api = apiClient(own.url, own.apiKey);
      const fx = await workspaceFixtures(api);
      const dep = await pushDeployment(api, fx.integrationId, remote.url);
      await eventually(async () => (own.output().includes(`"deployment_id":"${dep.id}","branch":"main","head":"${first}"`) ? true : undefined));

      // A repository webhook (no installation): delivered to the workspace's own URL with its own secret.
      const hook = await workspaceHook(api);
      const message = 'Fix a typo in the docs [skip ci]';
      // As on GitHub, the push comes first and its webhook after it. Here a pass sees the new head
      // before the delivery comes: it leaves the head to the webhook (it reads heads, not messages).
      const skipped = remote.commit(message);
      const unreported = `"msg":"reconciler: a head no webhook has reported; built if the next pass still finds it unhandled","deployment_id":"${dep.id}","branch":"main","head":"${skipped}"`;
      await eventually(async () => (own.output().includes(unreported) ? true : undefined));
      const delivery = await deliver(
        own.url,
        'push',
        pushPayload({ repo: 'local/remote', htmlUrl: remote.url, after: skipped, message, installationId: null }),
        {
          secret: hook.secret,
          path: hook.path,
        },
      );
      expect(delivery.status).toBe(202);
      const processed = await processedDelivery(api, delivery.id);
      expect(JSON.stringify(processed)).toContain('[skip ci]');

      // Several more passes see the branch head; none builds it.
      await new Promise((r) => setTimeout(r, 3500));
      const pushes = (await revisionsOf(api, dep.id)).filter((r) => r.trigger === 'push');
      expect(
        pushes.map((r) => r.source_revision_config.repo_commit_sha),
        `first ${first}, skipped ${skipped}\n${own.output()}`,
      ).toEqual([]);
      expect(own.output()).not.toContain(`"commit":"${skipped}"`);
    } finally {
      await own.kill('SIGKILL');
    }
  });
});
