import type { ApiKey } from '../../shared/schemas/api-key.ts';
import type { Deployment, DeploymentListQuery, SourceConfig, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { GithubIntegration } from '../../shared/schemas/integration.ts';
import type { ComputeConfig, ComputeType, Listener } from '../../shared/schemas/listener.ts';
import type { ResourceSpec } from '../../shared/schemas/resource-spec.ts';
import type { LogEntry, LogFilter, LogLevel, LogType, Revision, RevisionListQuery, RevisionStatus, RevisionTrigger } from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { Workspace } from '../../shared/schemas/workspace.ts';
import type { MachineActor } from '../lib/request-scope.ts';
import type { StartRules } from './rules.ts';

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
 * Everything the domain needs from storage. Every method is one atomic unit: a method that writes
 * several rows does so in one transaction. One implementation serves both databases (`core.ts`).
 */
export interface Store {
  close(): void;
  ping(): Promise<boolean>;
  /** Performs a real write and undoes it; throws the store's error when writes fail (readiness). */
  probeWrite(): Promise<void>;

  // tenancy and keys
  bootstrap(input: { keyHash: string | null; keyId: string; now: string }): Promise<BootstrapResult>;
  findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  createApiKey(input: ApiKey & { key_hash: string }): Promise<void>;
  listApiKeys(organizationId: string): Promise<ApiKey[]>;
  revokeApiKey(organizationId: string, id: string, now: string): Promise<boolean>;
  getWorkspace(id: string): Promise<(Workspace & { is_default: boolean }) | null>;
  getDefaultWorkspace(organizationId: string): Promise<Workspace | null>;
  createWorkspace(input: Workspace): Promise<void>;
  listWorkspaces(organizationId: string): Promise<Workspace[]>;

  // deployments
  createDeployment(input: NewDeployment): Promise<CreatedDeployment>;
  getDeployment(tenantId: string, id: string): Promise<DeploymentRecord | null>;
  getDeploymentById(id: string): Promise<DeploymentRecord | null>;
  listDeployments(tenantId: string, query: DeploymentListQuery): Promise<Page<DeploymentRecord>>;
  /**
   * Reads the deployment, lets `plan` decide the change (it may throw to abort), and writes the
   * change in the same transaction, so concurrent updates never overlay a stale config.
   */
  updateDeployment(
    tenantId: string,
    id: string,
    plan: (current: DeploymentRecord) => DeploymentChange,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; revision: RevisionRecord | null }>;
  /** Marks the deployment AWAITING_DELETE; `marked` is false when it already was (or null when it does not exist). */
  markDeploymentDeleting(
    tenantId: string,
    id: string,
    deleteTracingProject: boolean,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; marked: boolean } | null>;
  listDeletingDeployments(): Promise<DeploymentRecord[]>;
  /**
   * Makes `lease.owner` the one process tearing the deployment down: true when it is being deleted
   * and nobody else holds a live teardown lease on it (held by the caller already counts).
   */
  claimTeardown(deploymentId: string, lease: WorkLease): Promise<boolean>;
  /** Claims up to `limit` deployments being deleted whose teardown nobody holds (or whose lease has passed). */
  takeOverTeardowns(lease: WorkLease, limit: number): Promise<DeploymentRecord[]>;
  /** Renews the teardown leases `lease.owner` holds of these deployments; answers the ids renewed. */
  renewTeardownLeases(deploymentIds: readonly string[], lease: WorkLease): Promise<string[]>;
  /** Removes the deployment, its revisions and logs, and its tracing project when asked to. */
  removeDeployment(id: string): Promise<void>;

  /** Every `github` deployment of a repository (compared by `normalizeRepoUrl`), whatever its branch. */
  listDeploymentsByRepo(repoUrlKey: string): Promise<DeploymentRecord[]>;
  /** `github` deployments with `build_on_push` that are not being deleted. */
  listBuildOnPushDeployments(): Promise<DeploymentRecord[]>;
  /**
   * In one transaction: unless a revision of this deployment for `commitSha` exists that has not
   * failed, adds a `push` revision (the deployment's latest config with that commit) as the latest
   * revision. Two deliveries of one push racing each other therefore create one revision.
   * With `headSeen`, the same transaction records the commit as the head of that branch for the
   * reconciler (`WebhookStore.setReconcileHead`) whatever the outcome, while the deployment exists:
   * one commit, not two, per deployment a push builds.
   */
  createPushRevision(input: PushRevisionInput): Promise<PushRevisionResult>;

  // revisions and the pipeline
  getRevision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null>;
  getRevisionById(revisionId: string): Promise<RevisionRecord | null>;
  /** The revision with its secrets and resource spec, for the data plane and redeploys. */
  getRevisionWork(revisionId: string): Promise<RevisionWork | null>;
  /** The trace context stored with the revision (the request or delivery that made it); null when none came. */
  revisionTraceparent(revisionId: string): Promise<string | null>;
  listRevisions(tenantId: string, deploymentId: string, query: RevisionListQuery): Promise<Page<RevisionRecord>>;
  /** Applies the transition when the revision is in `from`; null when it had moved on. */
  transitionRevision(change: RevisionTransition, now: string): Promise<RevisionRecord | null>;
  /**
   * Reads the deployment's queue under its lock, lets the rules decide what starts and what is
   * skipped (`StartRules.planStart`, or the store's own rules when given only `firstStage`), and
   * writes that: the started revision moves to its first stage, the skipped ones to SKIPPED.
   */
  startNextRevision(deploymentId: string, start: StartRules | ((revision: RevisionRecord) => RevisionStatus), now: string): Promise<StartNextResult>;
  listUnfinishedRevisions(): Promise<RevisionRecord[]>;
  /**
   * Takes over up to `limit` started, unfinished revisions no live process holds: their process's
   * lease (`renewProcessLease`) has passed, or, never held, they have not changed since
   * `staleBefore`. Each becomes `lease.owner`'s; a process whose revisions were all taken is
   * forgotten (its next renewal finds no lease). Renews the caller's own lease first, and takes
   * nothing when that had lapsed (the caller's next `renewProcessLease` says so, and it re-checks
   * what it holds). Atomic per revision: of two processes asking at once, each revision goes to one.
   */
  takeOverRevisions(lease: WorkLease, staleBefore: string, limit: number): Promise<Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>>;
  /**
   * The lease of the process itself, which covers every revision naming it: one row write however
   * many it holds. True when it was still live; false when it had lapsed or did not exist (it is
   * live again from now on, but what the process held may have been taken over meanwhile).
   */
  renewProcessLease(lease: WorkLease): Promise<boolean>;
  /** Ends the process's lease now (a clean shutdown): its revisions are free at the next sweep. */
  endProcessLease(owner: string, now: string): Promise<void>;
  /**
   * Makes the given unfinished revisions `owner`'s when nobody holds them yet (started on create or
   * by `startNextRevision`); answers the ids now held by `owner`, those held already included. Holds
   * nothing while `owner` has no lease row, so a revision never names a process that has none. One
   * statement.
   */
  holdRevisions(ids: readonly string[], owner: string): Promise<string[]>;
  /** Gives up `owner`'s hold on these revisions: any process takes them over once they are stale. */
  releaseRevisions(ids: readonly string[], owner: string): Promise<void>;
  /** Deployments with a queued revision and none in progress: their start was lost with a process. */
  listStalledQueuedDeployments(): Promise<string[]>;
  /**
   * Appends lines in one transaction. With `cap`, the revision's stored lines and bytes stay within
   * it: lines past it are dropped (and every later one), and one marker line (`cap.marker`) says
   * how many, rewritten as more are dropped. Without, every line is stored (the server's own lines).
   */
  appendLogs(
    revisionId: string,
    /** `timestamp`: when the line was printed (an agent's report); stored times increase strictly per revision and type. */
    entries: Array<{ type: LogType; level: LogLevel; message: string; timestamp?: string }>,
    now: string,
    cap?: RevisionLogCap,
  ): Promise<{ stored: number; dropped: number }>;
  readLogs(revisionId: string, type: LogType, afterSeq: number, limit: number): Promise<{ logs: LogEntry[]; lastSeq: number | null; more: boolean }>;
  /** Log lines with filters and either order, each with its sequence number (the cursor). */
  searchLogs(revisionId: string, filter: LogFilter): Promise<{ logs: Array<LogEntry & { seq: number }>; more: boolean }>;

  // listeners
  createListener(input: Listener): Promise<void>;
  getListener(tenantId: string, id: string): Promise<ListenerRecord | null>;
  getListenerById(id: string): Promise<ListenerRecord | null>;
  /**
   * The compute type of the listener that serves a deployment of the workspace: `listenerId`, or the
   * workspace's default when null; null when there is none (the built-in sandbox serves). One read,
   * on every create, not a read of the workspace and then one of the listener.
   */
  servingComputeType(tenantId: string, listenerId: string | null): Promise<ComputeType | null>;
  listListeners(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>>;
  updateListener(tenantId: string, id: string, computeConfig: ComputeConfig, now: string, version?: string | null): Promise<ListenerRecord | null>;
  /** False when deployments still use the listener. */
  deleteListener(tenantId: string, id: string): Promise<'deleted' | 'not_found' | 'in_use'>;

  // GitHub integrations
  createIntegration(input: IntegrationRecord): Promise<void>;
  getIntegration(tenantId: string, id: string): Promise<IntegrationRecord | null>;
  listIntegrations(tenantId: string): Promise<IntegrationRecord[]>;
  deleteIntegration(tenantId: string, id: string): Promise<boolean>;
  getIntegrationById(id: string): Promise<IntegrationRecord | null>;
  /** `installation` `deleted`: removes every link to the installation; answers the removed ones. */
  removeInstallation(installationId: number, audit?: MachineChange): Promise<IntegrationRecord[]>;
  /** `installation` `suspend` / `unsuspend`: answers the integrations that were marked. */
  setInstallationSuspended(installationId: number, suspendedAt: string | null, audit?: MachineChange): Promise<IntegrationRecord[]>;

  // tracing projects
  getTracingProject(tenantId: string, id: string): Promise<TracingProject | null>;
  listTracingProjects(tenantId: string, name: string | undefined, limit: number, offset: number): Promise<Page<TracingProject>>;
  /** Deletes a project no deployment holds; one that a deployment holds is left, and its deployment named. */
  deleteTracingProject(tenantId: string, id: string): Promise<'deleted' | 'not_found' | { deploymentId: string }>;
}

/** What one revision keeps of its log (build and deploy lines together); the rule is domain/log-caps.ts. */
export type RevisionLogCap = {
  maxLines: number;
  maxBytes: number;
  /** The one line that replaces everything past the cap, rewritten as more is dropped. */
  marker: (dropped: number) => string;
};
