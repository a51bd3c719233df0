import { page } from '../../shared/schemas/common.ts';
import { Deployment, RevisionCreate } from '../../shared/schemas/deployment.ts';
import { Revision, RevisionListQuery, RevisionLogs, RevisionLogsQuery } from '../../shared/schemas/revision.ts';
import { publicDeployment } from '../domain/deployments.ts';
import { publicRevision } from '../domain/revisions.ts';
import type { RouteContext } from '../http/env.ts';
import { clientGone, jsonResponse, requestHeader } from '../http/node-request.ts';
import { matchesCurrent, preferredWaitMs, revisionBody, revisionHeaders, storedRevisionJson } from '../http/revision-answer.ts';
import { route } from '../http/route.ts';

export function revisionRoutes(ctx: RouteContext): void {
  const { revisions, deployments, pipeline } = ctx.services;
  const tag = 'revisions';
  const base = '/v2/deployments/:deployment_id/revisions';

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: base,
      summary: 'List revisions, newest first',
      tag,
      query: RevisionListQuery,
      response: { status: 200, schema: page(Revision) },
    },
    async (c, { params, query }) => {
      const result = await revisions.list(c.get('principal').workspaceId, params.deployment_id, query);
      return c.json({ resources: result.resources.map(publicRevision), offset: result.offset });
    },
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: base,
      summary: "Create a revision from the PATCH's revision fields; an empty body rebuilds the latest revision's config",
      tag,
      body: RevisionCreate,
      bodyReading: { emptyBody: 'empty-object' },
      response: { status: 201, schema: Revision },
    },
    async (c, { params, body }) => c.json(publicRevision(await deployments.createRevision(c.get('principal').workspaceId, params.deployment_id, body)), 201),
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: `${base}/:revision_id`,
      summary: 'Get a revision. With If-None-Match and Prefer: wait=<s ≤ 60>, held until it changes (200) or the time passes (304)',
      tag,
      headers: [
        { name: 'If-None-Match', description: 'An ETag this client has (a list, `W/` and `*` accepted): 304 while the revision still has it' },
        {
          name: 'Prefer',
          description: '`wait=<seconds>` (at most 60) with If-None-Match: hold the request until the revision changes (200) or the time passes (304)',
        },
      ],
      response: { status: 200, schema: Revision, headers: { ETag: "The revision's current entity tag, for If-None-Match", 'Cache-Control': '`no-cache`' } },
      responses: [
        {
          status: 304,
          schema: null,
          description: 'Not changed (within the wait, if one was asked for)',
          headers: { ETag: "The revision's current entity tag", 'Cache-Control': '`no-cache`' },
        },
      ],
    },
    // The Action's hot path (polled by every deploy): headers read from Node's request and the
    // answer's headers given as a plain object, so no `Headers` object is built either way.
    async (c, { params }) => {
      const tenantId = c.get('principal').workspaceId;
      const { deployment_id: deploymentId, revision_id: revisionId } = params;
      const known = requestHeader(c, 'if-none-match');
      if (known) {
        const waitMs = preferredWaitMs(requestHeader(c, 'prefer'));
        const isKnown = (etag: string) => matchesCurrent(known, etag);
        const { revision, changed } = await revisions.getWhenChanged(
          tenantId,
          deploymentId,
          revisionId,
          isKnown,
          waitMs ?? 0,
          waitMs ? clientGone(c) : undefined,
        );
        if (!changed) return new Response(null, { status: 304, headers: revisionHeaders(revision) });
        return jsonResponse(revisionBody(revision), 200, revisionHeaders(revision));
      }
      const revision = await revisions.get(tenantId, deploymentId, revisionId);
      return jsonResponse(storedRevisionJson(revision), 200, revisionHeaders(revision));
    },
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: `${base}/:revision_id/redeploy`,
      summary: 'Deploy an earlier revision again (rollback): a new revision with its config and secrets',
      tag,
      response: { status: 200, schema: Deployment },
    },
    async (c, { params }) => {
      const deployment = await deployments.redeploy(c.get('principal').workspaceId, params.deployment_id, params.revision_id);
      return c.json(publicDeployment(deployment));
    },
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: `${base}/:revision_id/interrupt`,
      summary: 'Interrupt a revision that has not ended',
      tag,
      response: { status: 200, schema: Revision },
    },
    async (c, { params }) => {
      const tenantId = c.get('principal').workspaceId;
      const { deployment_id: deploymentId, revision_id: revisionId } = params;
      await revisions.get(tenantId, deploymentId, revisionId);
      return c.json(publicRevision(await pipeline.interrupt(tenantId, deploymentId, revisionId)));
    },
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: `${base}/:revision_id/logs`,
      summary: 'Build or deploy log lines of a revision',
      tag,
      query: RevisionLogsQuery,
      response: { status: 200, schema: RevisionLogs },
    },
    async (c, { params, query }) => c.json(await revisions.logs(c.get('principal').workspaceId, params.deployment_id, params.revision_id, query)),
  );
}
