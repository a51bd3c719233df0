import type { ApiKey } from '../../shared/schemas/api-key.ts';
import type { Deployment, SourceConfig, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { GithubIntegration } from '../../shared/schemas/integration.ts';
import type { Listener } from '../../shared/schemas/listener.ts';
import type { ResourceSpec } from '../../shared/schemas/resource-spec.ts';
import type { LogLevel, LogType, Revision, RevisionStatus, RevisionTrigger } from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { MachineActor } from '../lib/request-scope.ts';
import type { ApiKeyStore } from './api-keys.ts';
import type { StoreHealth } from './core.ts';
import type { DeploymentStore } from './deployments.ts';
import type { IntegrationStore } from './integrations.ts';
import type { ListenerStore } from './listeners.ts';
import type { RevisionLeaseStore } from './revision-leases.ts';
import type { RevisionLogStore } from './revision-logs.ts';
import type { RevisionStore } from './revisions.ts';
import type { TeardownStore } from './teardowns.ts';
import type { TracingProjectStore } from './tracing-projects.ts';
import type { WorkspaceStore } from './workspaces.ts';

/** A deployment as the domain sees it: secrets in clear (the store encrypts them at rest). */
export type DeploymentRecord = Deployment & { delete_tracing_project: boolean };

/** A revision as reads see it: no secrets, so the hot read paths decrypt nothing. */
export type RevisionRecord = Revision & {
  tenant_id: string;
  /** Bumped on every change; the long-poll's ETag. */
  version: number;
};

/** A revision with what the data plane needs to carry it out (secrets in clear). */
export type RevisionWork = RevisionRecord & {
  secrets: Secret[];
  resource_spec: ResourceSpec | null;
  /** The `traceparent` of the request or delivery that made it: the parent of its spans, the agents' too. */
  traceparent: string | null;
};

export type NewRevision = {
  id: string;
  trigger: RevisionTrigger;
  source_revision_config: SourceRevisionConfig;
  secrets: Secret[];
  resource_spec: ResourceSpec | null;
  /** The status it is created in: QUEUED unless said (a new deployment's first revision starts at once). */
  status?: RevisionStatus;
  status_message?: string | null;
  /** Log lines written with it, in the same transaction (the data plane's first step's, on create). */
  logs?: Array<{ type: LogType; level: LogLevel; message: string }>;
  /** Its trace context; by default the one of the work that makes it (`currentTraceparent`). */
  traceparent?: string | null;
};

/** What an atomic deployment update writes; `revision` is added as the new latest revision. */
export type DeploymentChange = {
  source_config: SourceConfig;
  source_revision_config: SourceRevisionConfig;
  secrets: Secret[];
  revision: NewRevision | null;
};

export type ApiKeyRecord = ApiKey & { revoked: boolean; key_hash: string };

export type ListenerRecord = Listener;
export type IntegrationRecord = GithubIntegration & { tenant_id: string; suspended: boolean; created_at: string };

export type Page<T> = { resources: T[]; offset: number };

export type BootstrapResult = {
  organizationId: string;
  workspaceId: string;
  /** True when the database had no API key at all before this call. */
  wasEmpty: boolean;
};

/** A stage change of one revision, applied only when the revision is still in one of `from`. */
export type RevisionTransition = {
  revisionId: string;
  from: readonly RevisionStatus[];
  to: RevisionStatus;
  statusMessage?: string | null;
  /** Log lines written in the same transaction as the status change. */
  logs?: Array<{ type: LogType; level: LogLevel; message: string }>;
};

/** Who made a change that no API key made (a GitHub delivery), and when: audited in the change's transaction. */
export type MachineChange = { actor: MachineActor; now: string };

/** What `createPushRevision` is asked: `headSeen.repoRef` is the branch whose head `commitSha` is. */
export type PushRevisionInput = {
  deploymentId: string;
  revisionId: string;
  commitSha: string;
  now: string;
  headSeen?: { repoRef: string };
  /** Who pushed it through (the GitHub delivery): audited in the revision's transaction, only when it is created. */
  actor?: MachineActor;
};

/**
 * What `createPushRevision` did: created the revision, found a revision of that commit that has
 * not failed (so created none), or found no deployment that can take a push build.
 */
export type PushRevisionResult =
  | { outcome: 'created'; revision: RevisionRecord }
  | { outcome: 'exists'; revisionId: string; status: RevisionStatus }
  | { outcome: 'not_buildable'; reason: string };

/**
 * A lease on work taken or renewed by one server process: `owner` is the process id,
 * `now` the time of the call, `until` when the lease ends unless renewed.
 */
export type WorkLease = { owner: string; now: string; until: string };

/** The process that runs a revision a create starts, and its time now (see `NewDeployment.runner`). */
export type RevisionRunner = { owner: string; now: string };

/** What `createDeployment` writes, in one transaction. */
export type NewDeployment = {
  deployment: Deployment;
  /** Null for the client-built sources, created empty until their first PATCH (`latest_revision_id: null`). */
  revision: NewRevision | null;
  tracingProject: TracingProject;
  /**
   * Given when the revision is started (not QUEUED): it names `owner` as its runner in the same
   * write when `owner`'s process lease is live at `now` (and the row locked against a sweep deleting
   * it), so no second write of every created revision has to name it (a cost of every POST). A
   * lapsed or missing lease leaves it unnamed, for the process's next
   * renewal to hold (`holdRevisions`), as a revision started elsewhere is.
   */
  runner?: RevisionRunner;
};

/** What a create stored: `revisionHeld` when its revision names the runner it was given. */
export type CreatedDeployment = { deployment: DeploymentRecord; revisionHeld: boolean };

/** The result of starting a deployment's next revision (the pipeline's one-at-a-time rule). */
export type StartNextResult = { started: RevisionRecord | null; skipped: string[] };

/**
 * Everything the domain needs from the core tables: one store per resource, each in its own file,
 * composed into one object by `composeStore` (core.ts). A feature is typed with the slices it uses.
 * Every method is one atomic unit: a method that writes several rows does so in one transaction.
 */
export type Store = StoreHealth &
  ApiKeyStore &
  WorkspaceStore &
  DeploymentStore &
  TeardownStore &
  RevisionStore &
  RevisionLeaseStore &
  RevisionLogStore &
  ListenerStore &
  IntegrationStore &
  TracingProjectStore;

export type {
  ApiKeyStore,
  DeploymentStore,
  IntegrationStore,
  ListenerStore,
  RevisionLeaseStore,
  RevisionLogStore,
  RevisionStore,
  StoreHealth,
  TeardownStore,
  TracingProjectStore,
  WorkspaceStore,
};

/** What one revision keeps of its log (build and deploy lines together); the rule is domain/log-caps.ts. */
export type RevisionLogCap = {
  maxLines: number;
  maxBytes: number;
  /** The one line that replaces everything past the cap, rewritten as more is dropped. */
  marker: (dropped: number) => string;
};
