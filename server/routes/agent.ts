import { Readable } from 'node:stream';
import type { Context } from 'hono';
import { z } from 'zod';
import {
  AgentHeartbeat,
  AgentHeartbeatAck,
  AgentLogAppend,
  AgentTransition,
  ClaimRequest,
  ClaimResponse,
  LeaseRenewed,
  LiveDeployments,
  RuntimeLogAppend,
  RuntimeLogsStored,
  VerifyKeyRequest,
  VerifyKeyResponse,
} from '../../shared/schemas/agent.ts';
import { Revision } from '../../shared/schemas/revision.ts';
import type { ListenerTokens } from '../domain/agents/listener-tokens.ts';
import type { AgentProtocol } from '../domain/agents/protocol.ts';
import { verifyDeploymentKey } from '../domain/agents/verify-key.ts';
import type { Auth } from '../domain/auth.ts';
import { publicRevision } from '../domain/revisions.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { pathId, SignedUrlQuery } from '../http/validation.ts';
import type { Store } from '../store/types.ts';

/**
 * The listener-agent protocol (docs/listener-protocol.md). These routes take a listener token, not
 * an API key (the API-key middleware skips them), and only the token's own listener's.
 */
export function agentRoutes(ctx: RouteContext, deps: { tokens: ListenerTokens; protocol: AgentProtocol; auth: Auth; store: Store }): void {
  const { tokens, protocol } = deps;
  const tag = 'listener-agent';
  const base = '/v2/listeners/:listener_id/agent';
  // Each route's caller check (route()'s checkCaller): the token first, before the path's other ids and the body are read.
  const agentOf = (c: Context) => tokens.authenticate(bearerOf(c.req.raw.headers), pathId(c, 'listener_id'));
  const anyAgent = (c: Context) => tokens.authenticateAgent(bearerOf(c.req.raw.headers));
  // Not behind the API key: the listener token is checked here, so the errors are listed rather than derived.
  const doc = { tag, auth: 'listener-token' as const, security: [{ ListenerToken: [] }], errors: [400, 401, 404, 409, 413, 415, 422, 503] };

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${base}/heartbeat`,
      summary: 'Agent heartbeat: version and capacity (listener token)',
      body: AgentHeartbeat,
      response: { status: 200, schema: AgentHeartbeatAck },
    },
    async (c, { body }, agent) => c.json(await protocol.heartbeat(agent, body)),
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${base}/claim`,
      summary: 'Long-poll for work and claim it with a lease; {"work": null} when none came in time (listener token)',
      body: ClaimRequest,
      response: { status: 200, schema: ClaimResponse },
    },
    async (c, { body }, agent) => c.json({ work: await protocol.claim(agent, body.agent_id, body.wait_seconds * 1000, c.req.raw.signal) }),
    agentOf,
  );

  const claimPath = `${base}/claims/:claim_id`;
  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${claimPath}/renew`,
      summary: "Renew a claim's lease; 409 when it was lost or its revision ended (listener token)",
      response: { status: 200, schema: LeaseRenewed },
    },
    async (c, { params }, agent) => c.json(await protocol.renew(agent, params.claim_id)),
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${claimPath}/transition`,
      summary: 'Move the claimed revision on (compare-and-set); 409 names the current status (listener token)',
      bodyReading: REPORTED_TEXT,
      body: AgentTransition,
      response: { status: 200, schema: Revision },
    },
    async (c, { params, body }, agent) => {
      const claimId = params.claim_id;
      return c.json(publicRevision(await protocol.transition(agent, claimId, body)));
    },
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${claimPath}/logs`,
      summary: 'Append build or deploy log lines of the claimed revision (listener token)',
      bodyReading: REPORTED_TEXT,
      body: AgentLogAppend,
      response: { status: 204, schema: null },
    },
    async (c, { params, body }, agent) => {
      const claimId = params.claim_id;
      await protocol.appendLogs(agent, claimId, body);
      return c.body(null, 204);
    },
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${claimPath}/done`,
      summary: 'Report a claimed teardown finished: the deployment is removed (listener token)',
      response: { status: 204, schema: null },
    },
    async (c, { params }, agent) => {
      await protocol.teardownDone(agent, params.claim_id);
      return c.body(null, 204);
    },
    agentOf,
  );

  route(
    ctx,
    { ...doc, method: 'delete', path: claimPath, summary: 'Give a claim back before its lease ends (listener token)', response: { status: 204, schema: null } },
    async (c, { params }, agent) => {
      await protocol.release(agent, params.claim_id);
      return c.body(null, 204);
    },
    agentOf,
  );

  // The signature alone is not enough: the token must be the claiming listener's and the claim still held.
  route(
    ctx,
    {
      ...doc,
      method: 'get',
      path: `${claimPath}/source`,
      summary:
        'Download the uploaded source tarball of the claimed internal_source revision, from the signed URL in the work item (listener token and signature)',
      query: SignedUrlQuery,
      response: {
        status: 200,
        schema: z.string(),
        contentType: 'application/gzip',
        description: 'The gzip tarball, streamed',
        headers: { 'Content-Length': 'Size of the tarball in bytes' },
      },
      errors: [400, 401, 403, 404, 409, 422, 503],
      // The signature is checked over these with the claim, so a missing or wrong one is its 403, not a 422.
      ownInput: 'the signed URL’s expires and signature are checked as a signature (403), not validated as input',
    },
    async (c, _input, agent) => {
      const { size, stream } = await protocol.openSource(agent, pathId(c, 'claim_id'), c.req.query('expires'), c.req.query('signature'));
      // Streamed from the chunk rows as the agent reads: the tarball is never held whole here.
      return c.body(Readable.toWeb(stream) as ReadableStream<Uint8Array>, 200, {
        'content-type': 'application/gzip',
        'content-length': String(size),
        'cache-control': 'no-store',
      });
    },
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${base}/revisions/:revision_id/runtime-logs`,
      summary:
        "Append what a live revision's agent server printed after DEPLOYED to its deploy log, rate-limited per deployment and per token, capped per revision (listener token)",
      body: RuntimeLogAppend,
      response: { status: 200, schema: RuntimeLogsStored },
    },
    async (c, { params, body }, agent) => c.json(await protocol.appendRuntimeLogs(agent, params.revision_id, body)),
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: `${base}/revisions/:revision_id/transition`,
      summary:
        'Fail a live revision after its claim ended: only DEPLOYED → DEPLOY_FAILED with a status_message (its server keeps exiting); 409 once its deployment serves another revision (listener token)',
      bodyReading: REPORTED_TEXT,
      body: AgentTransition,
      response: { status: 200, schema: Revision },
    },
    async (c, { params, body }, agent) => c.json(publicRevision(await protocol.failLive(agent, params.revision_id, body))),
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'get',
      path: `${base}/live`,
      summary: "The listener's live revisions with their secrets, to restart them without rebuilding (listener token)",
      response: { status: 200, schema: LiveDeployments },
    },
    async (c, _input, agent) => c.json(await protocol.live(agent)),
    agentOf,
  );

  route(
    ctx,
    {
      ...doc,
      method: 'post',
      path: '/v2/agent/verify-key',
      summary: "May this API key read this deployment of the agent's workspace? Asked by the agent's proxy before it forwards a request (listener token)",
      body: VerifyKeyRequest,
      response: { status: 200, schema: VerifyKeyResponse },
    },
    async (c, { body }, agent) => c.json(await verifyDeploymentKey(deps, agent, body)),
    anyAgent,
  );
}

/** Log lines and status messages quote build output: the protocol sanitises their text rather than refuse it. */
const REPORTED_TEXT = { nulCharacters: 'keep' } as const;

/** Only `Authorization: Bearer`: an `X-Api-Key` header is never read on agent routes. */
function bearerOf(headers: Headers): string | undefined {
  const authorization = headers.get('authorization');
  const bearer = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return bearer?.[1] ?? (headers.get('x-api-key') ? 'x-api-key' : undefined);
}
