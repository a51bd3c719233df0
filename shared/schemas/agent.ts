import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';
import { ResourceSpec } from './resource-spec.ts';
import { LogLevel, LogType, RevisionStatus } from './revision.ts';

/** `POST /v2/listeners/{id}/tokens` → 201: the token is shown this once and stored only as a hash. */
export const ListenerTokenCreated = lazySchema(() => z.object({ id: Uuid, listener_id: Uuid, token: z.string(), created_at: Timestamp }));
export type ListenerTokenCreated = z.infer<typeof ListenerTokenCreated>;

export const ListenerToken = lazySchema(() => z.object({ id: Uuid, listener_id: Uuid, created_at: Timestamp }));
export type ListenerToken = z.infer<typeof ListenerToken>;

/** Names one running agent process; a second agent on the same listener has another id. */
const AgentId = lazySchema(() =>
  z
    .string()
    .min(1)
    .max(100)
    .regex(/^[A-Za-z0-9._:-]+$/, { message: 'agent_id must be 1-100 characters of A-Z a-z 0-9 . _ : -' }),
);

export const AgentHeartbeat = lazySchema(() =>
  z.strictObject({
    agent_id: AgentId,
    version: z.string().min(1).max(100),
    /** How many pieces of work the agent can take at once. */
    capacity: z.int().min(0).max(1000),
    /**
     * The URL template the agent serves deployments under (its `--public-url`): `{name}` stands for
     * the deployment name's DNS-safe form. A deployment it deploys gets its `custom_url` from it.
     */
    public_url: z
      .string()
      .max(500)
      .refine(
        (template) =>
          template.includes('{name}') && /^https?:\/\/[^/\s]+/.test(template.replaceAll('{name}', 'x')) && URL.canParse(template.replaceAll('{name}', 'x')),
        {
          message: 'public_url must be an http(s) URL template containing {name}',
        },
      )
      .nullish(),
  }),
);
export type AgentHeartbeat = z.infer<typeof AgentHeartbeat>;

export const AgentHeartbeatAck = lazySchema(() => z.object({ listener_id: Uuid, heard_at: Timestamp, lease_ms: z.int() }));
export type AgentHeartbeatAck = z.infer<typeof AgentHeartbeatAck>;

export const ClaimRequest = lazySchema(() =>
  z.strictObject({
    agent_id: AgentId,
    /** Long-poll: hold the request up to this long until work appears (0: answer at once). */
    wait_seconds: z.number().min(0).max(60).default(25),
  }),
);
export type ClaimRequest = z.infer<typeof ClaimRequest>;

/**
 * Where the agent gets what it builds. `git`: the repository at `commit_sha` when known, else the
 * head of `ref`. `tarball`: the uploaded source archive of an internal_source revision, behind a
 * signed URL bound to the claim (`GET …/claims/{claim_id}/source`; null outside a claim, in `…/live`).
 */
export const WorkSource = lazySchema(() =>
  z.discriminatedUnion('type', [
    z.object({
      type: z.literal('git'),
      repo_url: z.string(),
      ref: z.string().nullable(),
      commit_sha: z.string().nullable(),
      /** A read-only installation token for this one repository (a private repository on the App's GitHub): for git, through the environment only. */
      token: z.string().nullish(),
    }),
    z.object({ type: z.literal('tarball'), url: z.string().nullable() }),
    z.object({ type: z.literal('image'), image_uri: z.string() }),
  ]),
);
export type WorkSource = z.infer<typeof WorkSource>;

/** The deployment as the agent needs it (no tenant-wide data). */
export const WorkDeployment = lazySchema(() =>
  z.object({
    id: Uuid,
    name: z.string(),
    /**
     * The name's URL form (lower case, `_` → `-`, a hash when that changed it): distinct for distinct
     * names, so a proxy routes by it and `Victim2` never answers for `victim2`.
     */
    url_name: z.string(),
    source: z.string(),
    custom_url: z.string().nullable(),
    install_command: z.string().nullable(),
    build_command: z.string().nullable(),
    /** `listener_config.k8s_namespace`: where a `k8s` agent runs the deployment (null: the agent's default). */
    k8s_namespace: z.string().nullable(),
    /** The k8s listener's `k8s_license_secret`: a Secret in the namespace with the image's license key (contract §18). */
    k8s_license_secret: z.string().nullable().optional(),
    /** The k8s listener's `k8s_allow_privileged`: the spec's own securityContexts are kept. */
    k8s_allow_privileged: z.boolean().optional(),
  }),
);
export type WorkDeployment = z.infer<typeof WorkDeployment>;

export const WorkRevision = lazySchema(() =>
  z.object({
    id: Uuid,
    status: RevisionStatus,
    graph_config_path: z.string().nullable(),
    source: WorkSource,
    /** The deployment's secrets: they reach the agent only here, inside claimed work. */
    secrets: z.array(z.object({ name: z.string(), value: z.string() })),
    /** The revision's ResourceSpec as stored (no defaults filled in): what a `k8s` agent renders. */
    resource_spec: ResourceSpec.nullable(),
    /**
     * W3C `traceparent` of the request (or GitHub delivery) that made the revision: the parent of the
     * agent's install, build and start spans. Optional: an older server sends none, an older agent ignores it.
     */
    traceparent: z.string().max(55).nullish(),
  }),
);
export type WorkRevision = z.infer<typeof WorkRevision>;

export const WorkItem = lazySchema(() =>
  z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('revision'),
      claim_id: Uuid,
      lease_expires_at: Timestamp,
      lease_ms: z.int(),
      deployment: WorkDeployment,
      revision: WorkRevision,
    }),
    z.object({ kind: z.literal('teardown'), claim_id: Uuid, lease_expires_at: Timestamp, lease_ms: z.int(), deployment: WorkDeployment }),
  ]),
);
export type WorkItem = z.infer<typeof WorkItem>;

export const ClaimResponse = lazySchema(() => z.object({ work: WorkItem.nullable() }));
export type ClaimResponse = z.infer<typeof ClaimResponse>;

export const LeaseRenewed = lazySchema(() => z.object({ claim_id: Uuid, lease_expires_at: Timestamp, status: RevisionStatus.nullable() }));
export type LeaseRenewed = z.infer<typeof LeaseRenewed>;

export const AgentTransition = lazySchema(() =>
  z.strictObject({
    from: RevisionStatus,
    to: RevisionStatus,
    status_message: z.string().max(4000).nullish(),
    /** The commit the agent built: becomes the revision's `repo_commit_sha`. */
    repo_commit_sha: z
      .string()
      .regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, { message: 'repo_commit_sha must be a full hex commit id' })
      .nullish(),
  }),
);
export type AgentTransition = z.infer<typeof AgentTransition>;

export const AgentLogLine = lazySchema(() =>
  z.strictObject({
    type: LogType,
    level: LogLevel.default('info'),
    message: z.string().max(16_000),
    /** When the agent saw the line (printed by a command, or its own); stored as its time, as a runtime line's is. Optional: older agents send none. */
    timestamp: z.iso.datetime({ offset: true }).optional(),
  }),
);
export const AgentLogAppend = lazySchema(() => z.strictObject({ lines: z.array(AgentLogLine).min(1).max(1000) }));
export type AgentLogAppend = z.infer<typeof AgentLogAppend>;

/** `POST …/agent/revisions/{revision_id}/runtime-logs`: what a live revision's agent server printed after `DEPLOYED`. */
export const RuntimeLogAppend = lazySchema(() =>
  z.strictObject({
    lines: z
      .array(
        z.strictObject({
          level: LogLevel.default('info'),
          message: z.string().max(16_000),
          /** When the agent server printed the line; stored as its time (never later than the server's now, strictly after the line before). */
          timestamp: z.iso.datetime({ offset: true }).optional(),
        }),
      )
      .min(1)
      .max(1000),
    /** Lines the agent itself dropped since its last send (its own rate limit or queue bound): stored as one line saying so. */
    dropped: z.int().min(0).default(0),
  }),
);
export type RuntimeLogAppend = z.infer<typeof RuntimeLogAppend>;

export const RuntimeLogsStored = lazySchema(() => z.object({ stored: z.int(), dropped: z.int() }));
export type RuntimeLogsStored = z.infer<typeof RuntimeLogsStored>;

/** `GET …/agent/live`: what the listener's agents should be running (restart without rebuilding). */
export const LiveDeployments = lazySchema(() =>
  z.object({
    deployments: z.array(z.object({ deployment: WorkDeployment, revision: WorkRevision })),
  }),
);
export type LiveDeployments = z.infer<typeof LiveDeployments>;

/** An agent's question before its proxy forwards a request: may this API key read this deployment? */
export const VerifyKeyRequest = lazySchema(() => z.strictObject({ key: z.string().min(1).max(512), deployment_id: Uuid }));
export type VerifyKeyRequest = z.infer<typeof VerifyKeyRequest>;

/**
 * `allowed`; when not, `reason`: `invalid` (no such key, revoked or expired: the proxy answers 401)
 * or `other_workspace` (a valid key that may not read this deployment: 403).
 */
export const VerifyKeyResponse = lazySchema(() => z.object({ allowed: z.boolean(), reason: z.enum(['invalid', 'other_workspace']).optional() }));
export type VerifyKeyResponse = z.infer<typeof VerifyKeyResponse>;
