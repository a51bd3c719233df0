import { streamSSE } from 'hono/streaming';
import { DeploymentListQuery } from '../../shared/schemas/deployment.ts';
import { RevisionListQuery } from '../../shared/schemas/revision.ts';
import { publicDeployment } from '../domain/deployments.ts';
import { BadRequest, NotFound } from '../domain/errors.ts';
import { publicRevision } from '../domain/revisions.ts';
import type { LiveSubject } from '../store/console.ts';
import { deploymentPage } from './pages/deployment.ts';
import { type DeploymentRow, deploymentsPage } from './pages/deployments.ts';
import { revisionPage } from './pages/revision.ts';
import { type C, type ConsolePages, cursorParam, htmlAnswer, noticeOf, offsetParam, PAGE_SIZE, UUID, uuidParam } from './route-kit.ts';
import type { ConsoleSession } from './sessions.ts';

const LOG_LINES = 1000;

/** The deployments, a deployment, a revision with its logs, their actions (each confirmed), and the pages' live updates. */
export function deploymentRoutes(pages: ConsolePages): void {
  const { app, deps, signedIn, frameOf, liveUrl, confirmed } = pages;
  const { services, hub } = deps;

  app.get(
    '/',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const query = DeploymentListQuery.parse({ limit: PAGE_SIZE + 1, offset: offsetParam(c), name_contains: c.req.query('name_contains') || undefined });
      const listed = await services.deployments.list(tenantId, query);
      const shown = listed.resources.slice(0, PAGE_SIZE);
      const rows: DeploymentRow[] = await Promise.all(
        shown.map(async (record) => {
          const deployment = publicDeployment(record);
          const [active, latest] = await Promise.all([
            revisionOrNull(tenantId, deployment.id, deployment.active_revision_id),
            deployment.latest_revision_id === deployment.active_revision_id ? null : revisionOrNull(tenantId, deployment.id, deployment.latest_revision_id),
          ]);
          return { deployment, active, latest: latest ?? active };
        }),
      );
      return htmlAnswer(
        c,
        deploymentsPage({
          frame: await frameOf(session),
          live: await liveUrl({ kind: 'deployments', tenantId, deploymentIds: shown.map((record) => record.id) }),
          rows,
          nameContains: query.name_contains,
          offset: query.offset,
          limit: PAGE_SIZE,
          more: listed.resources.length > PAGE_SIZE,
          notice: noticeOf(c),
        }),
      );
    }),
  );

  async function revisionOrNull(tenantId: string, deploymentId: string, revisionId: string | null) {
    if (!revisionId) return null;
    const found = await services.revisions.find(tenantId, deploymentId, revisionId);
    return found ? publicRevision(found) : null;
  }

  app.get(
    '/deployments/:deployment_id',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const deploymentId = uuidParam(c, 'deployment_id');
      const deployment = publicDeployment(await services.deployments.get(tenantId, deploymentId));
      const query = RevisionListQuery.parse({ limit: PAGE_SIZE + 1, offset: offsetParam(c) });
      const listed = await services.revisions.list(tenantId, deploymentId, query);
      return htmlAnswer(
        c,
        deploymentPage({
          frame: await frameOf(session),
          live: await liveUrl({ kind: 'deployment', tenantId, deploymentId }),
          deployment,
          revisions: listed.resources.slice(0, PAGE_SIZE).map(publicRevision),
          offset: query.offset,
          limit: PAGE_SIZE,
          more: listed.resources.length > PAGE_SIZE,
          githubWebUrl: deps.githubWebUrl,
          notice: noticeOf(c),
        }),
      );
    }),
  );

  app.get(
    '/deployments/:deployment_id/revisions/:revision_id',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const deploymentId = uuidParam(c, 'deployment_id');
      const revisionId = uuidParam(c, 'revision_id');
      const deployment = publicDeployment(await services.deployments.get(tenantId, deploymentId));
      const revision = publicRevision(await services.revisions.get(tenantId, deploymentId, revisionId));
      // Each log from its cursor (`build_from`, `deploy_from`: the API's `next_offset`), a page of lines at a time.
      const buildFrom = cursorParam(c, 'build_from');
      const deployFrom = cursorParam(c, 'deploy_from');
      const [build, deploy] = await Promise.all([
        services.revisions.logs(tenantId, deploymentId, revisionId, { type: 'build', offset: buildFrom, limit: LOG_LINES }),
        services.revisions.logs(tenantId, deploymentId, revisionId, { type: 'deploy', offset: deployFrom, limit: LOG_LINES }),
      ]);
      const logPage = (from: number, answer: { logs: unknown[]; next_offset: number | null }) => ({
        from,
        next: answer.logs.length === LOG_LINES ? answer.next_offset : null,
      });
      return htmlAnswer(
        c,
        revisionPage({
          frame: await frameOf(session),
          live: await liveUrl({ kind: 'revision', tenantId, deploymentId, revisionId }),
          deployment,
          revision,
          build: { lines: build.logs, ...logPage(buildFrom, build) },
          deploy: { lines: deploy.logs, ...logPage(deployFrom, deploy) },
          githubWebUrl: deps.githubWebUrl,
        }),
      );
    }),
  );

  /** An action on a deployment or one of its revisions, asked first; back goes to the page it was asked from. */
  function action(input: {
    path: string;
    title: string;
    question: (name: string) => string;
    button: string;
    danger?: boolean;
    run: (session: ConsoleSession, deploymentId: string, revisionId: string | undefined) => Promise<void>;
    done: (deploymentId: string) => string;
  }) {
    const revisionOf = (c: C) => (c.req.param('revision_id') === undefined ? undefined : uuidParam(c, 'revision_id'));
    confirmed({
      ...input,
      question: async (c, session) => {
        // A malformed revision id is the page that does not exist, before anything is asked.
        revisionOf(c);
        return input.question((await services.deployments.get(session.principal.workspaceId, uuidParam(c, 'deployment_id'))).name);
      },
      back: (c) => `/console${c.req.path.replace(/^\/console/, '').replace(/\/[a-z-]+$/, '')}`,
      run: (c, session) => input.run(session, uuidParam(c, 'deployment_id'), revisionOf(c)),
      done: (c) => input.done(uuidParam(c, 'deployment_id')),
    });
  }

  action({
    path: '/deployments/:deployment_id/redeploy',
    title: 'Redeploy',
    question: (name) => `Build and deploy ${name} again from its current configuration?`,
    button: 'Redeploy',
    run: async (session, deploymentId) => {
      await services.deployments.createRevision(session.principal.workspaceId, deploymentId, {});
    },
    done: (id) => `/console/deployments/${id}?done=redeploy`,
  });

  action({
    path: '/deployments/:deployment_id/delete',
    title: 'Delete deployment',
    question: (name) => `Delete ${name}? Its revisions stop and it is removed once torn down. This cannot be undone.`,
    button: 'Delete',
    danger: true,
    run: (session, deploymentId) => services.deployments.delete(session.principal.workspaceId, deploymentId, false),
    done: () => '/console?done=deleted',
  });

  action({
    path: '/deployments/:deployment_id/revisions/:revision_id/rollback',
    title: 'Roll back',
    question: (name) => `Deploy this earlier revision of ${name} again (a new revision with its configuration and secrets)?`,
    button: 'Roll back',
    run: async (session, deploymentId, revisionId) => {
      const tenantId = session.principal.workspaceId;
      const revision = await services.revisions.get(tenantId, deploymentId, revisionId!);
      if (revision.status !== 'DEPLOYED') throw new BadRequest(`Only a revision that was DEPLOYED can be rolled back to; this one is ${revision.status}.`);
      await services.deployments.redeploy(tenantId, deploymentId, revisionId!);
    },
    done: (id) => `/console/deployments/${id}?done=rollback`,
  });

  action({
    path: '/deployments/:deployment_id/revisions/:revision_id/interrupt',
    title: 'Interrupt',
    question: (name) => `Interrupt this revision of ${name}? What it has not done yet is not done.`,
    button: 'Interrupt',
    danger: true,
    run: async (session, deploymentId, revisionId) => {
      const tenantId = session.principal.workspaceId;
      await services.revisions.get(tenantId, deploymentId, revisionId!);
      await services.pipeline.interrupt(tenantId, deploymentId, revisionId!);
    },
    done: (id) => `/console/deployments/${id}?done=interrupt`,
  });

  app.get(
    '/live',
    signedIn(async (c, session) => {
      const tenantId = session.principal.workspaceId;
      const deploymentId = c.req.query('deployment_id');
      const revisionId = c.req.query('revision_id');
      // The deployments a list page shows (at most a page of them).
      const shownIds = (c.req.query('deployment_ids') ?? '').split(',').filter((id) => id !== '');
      const malformed =
        (deploymentId && !UUID.test(deploymentId)) ||
        (revisionId && (!UUID.test(revisionId) || !deploymentId)) ||
        shownIds.length > PAGE_SIZE ||
        shownIds.some((id) => !UUID.test(id));
      if (malformed) throw new NotFound('No such page to watch.');
      const subject: LiveSubject = revisionId
        ? { kind: 'revision', tenantId, deploymentId: deploymentId!, revisionId: revisionId.toLowerCase() }
        : deploymentId
          ? { kind: 'deployment', tenantId, deploymentId: deploymentId.toLowerCase() }
          : { kind: 'deployments', tenantId, deploymentIds: shownIds.map((id) => id.toLowerCase()) };
      const since = c.req.query('since') ?? '';
      const current = await hub.fingerprint(subject);
      return streamSSE(c, async (stream) => {
        let end: () => void = () => {};
        const ended = new Promise<void>((resolve) => (end = resolve));
        const changed = () => void stream.writeSSE({ event: 'changed', data: '' }).catch(end);
        const unwatch = hub.watch(subject, current, changed);
        // Proxies drop idle streams; a comment line now and then keeps it open. The session's end ends it.
        const keepAlive = setInterval(() => {
          if (Date.now() >= Date.parse(session.expiresAt)) end();
          else void stream.write(': keep-alive\n\n').catch(end);
        }, 25_000);
        stream.onAbort(end);
        if (since !== current) changed();
        await ended;
        clearInterval(keepAlive);
        unwatch();
      });
    }),
  );
}
