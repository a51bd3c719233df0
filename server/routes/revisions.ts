import { page } from '../../shared/schemas/common.ts';
import { Deployment, RevisionCreate } from '../../shared/schemas/deployment.ts';
import { Revision, RevisionListQuery, RevisionLogs, RevisionLogsQuery } from '../../shared/schemas/revision.ts';
import { publicDeployment } from '../domain/deployments.ts';
import { publicRevision, revisionEtag } from '../domain/revisions.ts';
import type { RouteContext } from '../http/env.ts';
import { clientGone, jsonResponse, requestHeader } from '../http/fast.ts';
import type { RevisionRecord } from '../store/types.ts';
import { route } from '../http/route.ts';
import { pathId, readJson, readQuery } from '../http/validation.ts';

const MAX_WAIT_SECONDS = 60;

/**
 * `Prefer: wait=<seconds>` (RFC 7240), capped at 60; null when absent. A preference that cannot be
 * understood is ignored, as RFC 7240 asks, which makes the request an ordinary conditional GET.
 */
export function preferredWaitMs(header: string | undefined): number | null {
  if (!header) return null;
  const match = /(?:^|[,;\s])wait\s*=\s*"?([^",;\s]*)"?/i.exec(header);
  if (!match) return null;
  const seconds = Number(match[1]);
  if (!Number.isFinite(seconds) || seconds < 0) return null;
  return Math.min(seconds, MAX_WAIT_SECONDS) * 1000;
}

/**
 * Whether `If-None-Match` names the current ETag: `*`, or a comma-separated list of tags compared
 * weakly (a `W/` prefix is ignored), as RFC 9110 says for If-None-Match.
 */
export function matchesCurrent(ifNoneMatch: string, etag: string): boolean {
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}

/** The answer's body for a record read for this request alone (a plain GET). */
export function revisionJson(revision: RevisionRecord): string {
  return JSON.stringify(publicRevision(revision));
}

/**
 * The answer's body of a conditional GET, serialized once per record: the waiters woken by one
 * change all hold the same announced record, so a thousand of them share one `JSON.stringify`.
 * Not for plain GETs: every entry of a WeakMap whose key is still in the young generation is work
 * for each young-generation collection, and at thousands of GETs a second those entries made the
 * collections' pauses grow with the time between them (`bench/RESULTS.md`, runs of 2026-11-25
 * 12:30–13:45).
 */
const bodies = new WeakMap<RevisionRecord, string>();
export function revisionBody(revision: RevisionRecord): string {
  let body = bodies.get(revision);
  if (body === undefined) bodies.set(revision, (body = revisionJson(revision)));
  return body;
}

export function revisionRoutes(ctx: RouteContext): void {
  const { revisions, deployments, pipeline } = ctx.services;
  const tag = 'revisions';
  const base = '/v2/deployments/:deployment_id/revisions';

  route(ctx, { method: 'get', path: base, summary: 'List revisions, newest first', tag, query: RevisionListQuery, response: { status: 200, schema: page(Revision) } }, async (c) => {
    const deploymentId = pathId(c, 'deployment_id');
    const query = readQuery(c, RevisionListQuery);
    const result = await revisions.list(c.get('principal').workspaceId, deploymentId, query);
    return c.json({ resources: result.resources.map(publicRevision), offset: result.offset });
  });

  route(ctx, { method: 'post', path: base, summary: "Create a revision from the PATCH's revision fields; an empty body rebuilds the latest revision's config", tag, body: RevisionCreate, response: { status: 201, schema: Revision } }, async (c) => {
    const deploymentId = pathId(c, 'deployment_id');
    const empty = !c.req.header('content-type') && (c.req.header('content-length') ?? '0') === '0';
    const body = empty ? {} : await readJson(c, RevisionCreate);
    return c.json(publicRevision(await deployments.createRevision(c.get('principal').workspaceId, deploymentId, body)), 201);
  });

  route(
    ctx,
    {
      method: 'get',
      path: `${base}/:revision_id`,
      summary: 'Get a revision. With If-None-Match and Prefer: wait=<s ≤ 60>, held until it changes (200) or the time passes (304)',
      tag,
      headers: [
        { name: 'If-None-Match', description: 'An ETag this client has (a list, `W/` and `*` accepted): 304 while the revision still has it' },
        { name: 'Prefer', description: '`wait=<seconds>` (at most 60) with If-None-Match: hold the request until the revision changes (200) or the time passes (304)' },
      ],
      response: { status: 200, schema: Revision, headers: { ETag: 'The revision\'s current entity tag, for If-None-Match', 'Cache-Control': '`no-cache`' } },
      responses: [{ status: 304, schema: null, description: 'Not changed (within the wait, if one was asked for)', headers: { ETag: 'The revision\'s current entity tag', 'Cache-Control': '`no-cache`' } }],
    },
    // The Action's hot path (polled by every deploy): headers read from Node's request and the
    // answer's headers given as a plain object, so no `Headers` object is built either way.
    async (c) => {
      const tenantId = c.get('principal').workspaceId;
      const deploymentId = pathId(c, 'deployment_id');
      const revisionId = pathId(c, 'revision_id');
      const known = requestHeader(c, 'if-none-match');
      if (known) {
        const waitMs = preferredWaitMs(requestHeader(c, 'prefer'));
        const isKnown = (etag: string) => matchesCurrent(known, etag);
        const { revision, changed } = await revisions.getWhenChanged(tenantId, deploymentId, revisionId, isKnown, waitMs ?? 0, waitMs ? clientGone(c) : undefined);
        const headers = { etag: revisionEtag(revision), 'cache-control': 'no-cache' };
        if (!changed) return new Response(null, { status: 304, headers });
        return jsonResponse(revisionBody(revision), 200, headers);
      }
      const revision = await revisions.get(tenantId, deploymentId, revisionId);
      return jsonResponse(revisionJson(revision), 200, { etag: revisionEtag(revision), 'cache-control': 'no-cache' });
    },
  );

  route(ctx, { method: 'post', path: `${base}/:revision_id/redeploy`, summary: 'Deploy an earlier revision again (rollback): a new revision with its config and secrets', tag, response: { status: 200, schema: Deployment } }, async (c) => {
    const deployment = await deployments.redeploy(c.get('principal').workspaceId, pathId(c, 'deployment_id'), pathId(c, 'revision_id'));
    return c.json(publicDeployment(deployment));
  });

  route(ctx, { method: 'post', path: `${base}/:revision_id/interrupt`, summary: 'Interrupt a revision that has not ended', tag, response: { status: 200, schema: Revision } }, async (c) => {
    const tenantId = c.get('principal').workspaceId;
    const deploymentId = pathId(c, 'deployment_id');
    const revisionId = pathId(c, 'revision_id');
    await revisions.get(tenantId, deploymentId, revisionId);
    return c.json(publicRevision(await pipeline.interrupt(tenantId, deploymentId, revisionId)));
  });

  route(ctx, { method: 'get', path: `${base}/:revision_id/logs`, summary: 'Build or deploy log lines of a revision', tag, query: RevisionLogsQuery, response: { status: 200, schema: RevisionLogs } }, async (c) => {
    const deploymentId = pathId(c, 'deployment_id');
    const revisionId = pathId(c, 'revision_id');
    const query = readQuery(c, RevisionLogsQuery);
    return c.json(await revisions.logs(c.get('principal').workspaceId, deploymentId, revisionId, query));
  });
}
