import { type ApiClient, ApiError, ResponseShapeError, TransientError } from '../client.ts';
import type { Deployment } from '../schemas/deployment.ts';
import { FAILED_REVISION_STATUSES, type LogEntry, type Revision, type RevisionStatus } from '../schemas/revision.ts';
import { type ApplyAction, applyDeployment } from './apply.ts';
import { type DeployOptions, InputError } from './options.ts';
import { type Transition, waitForRevision } from './wait.ts';

/**
 * How a run ended:
 * - `deployed`: the revision this run created reached DEPLOYED;
 * - `unchanged`: the PATCH created no revision, so there was nothing to wait for;
 * - `not-waited`: `wait` was false; the request was made;
 * - `failed`: the revision ended in a failed status (BUILD_FAILED, DEPLOY_FAILED, CREATE_FAILED, SKIPPED, INTERRUPTED);
 * - `timeout`: the deadline passed first;
 * - `cancelled`: the run was aborted (a signal);
 * - `error`: a request failed for good (`errorKind` says how).
 */
export type Outcome = 'deployed' | 'unchanged' | 'not-waited' | 'failed' | 'timeout' | 'cancelled' | 'error';
export type ErrorKind = 'input' | 'api' | 'unreachable';

export type DeployResult = {
  outcome: Outcome;
  errorKind: ErrorKind | null;
  deployment: Deployment | null;
  action: ApplyAction | null;
  revisionId: string | null;
  /** The last status seen of the revision. */
  status: RevisionStatus | null;
  url: string | null;
  /** Why it did not succeed, as a sentence. */
  reason: string | null;
  /** For SKIPPED: the revision that superseded this one. */
  supersededBy: string | null;
  transitions: Array<Transition & { seenAt: string }>;
  logs: { build: LogEntry[]; deploy: LogEntry[] };
};

export type DeployHooks = {
  /** The deployment is known (created, patched, or found with nothing to change). */
  onDeployment?: (deployment: Deployment, action: ApplyAction) => void;
  /** The revision this run waits on is known. */
  onRevision?: (revisionId: string) => void;
  onStatus?: (transition: Transition & { seenAt: string }, revision: Revision) => void;
  onInfo?: (message: string) => void;
};

export type WaitTarget = { deploymentId: string; revisionId: string };

const LOG_LINES = 20;

function emptyResult(): DeployResult {
  return {
    outcome: 'error',
    errorKind: null,
    deployment: null,
    action: null,
    revisionId: null,
    status: null,
    url: null,
    reason: null,
    supersededBy: null,
    transitions: [],
    logs: { build: [], deploy: [] },
  };
}

/** The address the deployment answers on, when it has one. */
export function deploymentUrl(deployment: Deployment | null): string | null {
  return deployment?.source_config.custom_url ?? null;
}

/**
 * Creates or PATCHes the deployment, then (unless `wait` is false) waits on the exact revision this
 * run created until it is DEPLOYED, fails, or the deadline passes. Never throws for API trouble:
 * everything learnt so far is in the result, so outputs can be written on failure too.
 */
export async function deployAndWait(client: ApiClient, options: DeployOptions, hooks: DeployHooks = {}, signal?: AbortSignal): Promise<DeployResult> {
  const result = emptyResult();
  try {
    const applied = await applyDeployment(client, options, signal, hooks.onInfo);
    result.deployment = applied.deployment;
    result.action = applied.action;
    result.url = deploymentUrl(applied.deployment);
    hooks.onDeployment?.(applied.deployment, applied.action);
    if (applied.revisionId === null) {
      hooks.onInfo?.(
        `Deployment ${applied.deployment.name}: this ${applied.action === 'unchanged' ? 'run had nothing to change' : 'PATCH changed no revision field'}, so no revision was created; nothing to wait for.`,
      );
      result.outcome = 'unchanged';
      return result;
    }
    result.revisionId = applied.revisionId;
    hooks.onRevision?.(applied.revisionId);
    if (!options.wait) {
      const { revision } = await client.getRevision(applied.deployment.id, applied.revisionId, signal);
      result.status = revision.status;
      result.outcome = 'not-waited';
      return result;
    }
    await followRevision(client, { deploymentId: applied.deployment.id, revisionId: applied.revisionId }, options, hooks, result, signal);
  } catch (error) {
    recordError(result, error, signal);
  }
  return result;
}

/** Waits on a revision that already exists (the CLI's `wait`), with the same result as a deploy. */
export async function waitOnly(
  client: ApiClient,
  target: WaitTarget,
  options: Pick<DeployOptions, 'waitTimeoutMs' | 'pollIntervalMs'>,
  hooks: DeployHooks = {},
  signal?: AbortSignal,
): Promise<DeployResult> {
  const result = emptyResult();
  try {
    result.deployment = await client.getDeployment(target.deploymentId, signal);
    result.url = deploymentUrl(result.deployment);
    result.revisionId = target.revisionId;
    await followRevision(client, target, options, hooks, result, signal);
  } catch (error) {
    recordError(result, error, signal);
  }
  return result;
}

async function followRevision(
  client: ApiClient,
  target: WaitTarget,
  options: Pick<DeployOptions, 'waitTimeoutMs' | 'pollIntervalMs'>,
  hooks: DeployHooks,
  result: DeployResult,
  signal: AbortSignal | undefined,
): Promise<void> {
  const deadline = Date.now() + options.waitTimeoutMs;
  const { revision, timedOut } = await waitForRevision(client, target.deploymentId, target.revisionId, {
    deadline,
    pollIntervalMs: options.pollIntervalMs,
    signal,
    onInfo: hooks.onInfo,
    onStatus: (transition, seen) => {
      const entry = { ...transition, seenAt: new Date().toISOString() };
      result.status = transition.status;
      result.transitions.push(entry);
      hooks.onStatus?.(entry, seen);
    },
  });
  result.status = revision.status;
  if (timedOut) {
    result.outcome = 'timeout';
    result.reason = `Revision ${revision.id} did not reach DEPLOYED within ${formatDuration(options.waitTimeoutMs)}; its last status was ${revision.status}.`;
    return;
  }
  if (revision.status === 'DEPLOYED') {
    result.outcome = 'deployed';
    // The deployment may have gained its URL with the revision.
    result.deployment = await client.getDeployment(target.deploymentId, signal).catch(() => result.deployment);
    result.url = deploymentUrl(result.deployment);
    return;
  }
  if (FAILED_REVISION_STATUSES.has(revision.status)) {
    result.outcome = 'failed';
    await explainFailure(client, target, revision, result, signal);
  }
}

/** Fills in why the revision failed: its status message, the newer revision for SKIPPED, the last log lines. */
async function explainFailure(client: ApiClient, target: WaitTarget, revision: Revision, result: DeployResult, signal: AbortSignal | undefined): Promise<void> {
  const message = revision.status_message ?? `the revision ended with status ${revision.status}`;
  result.reason = `Revision ${revision.id} ended with ${revision.status}: ${message}`;
  if (revision.status === 'SKIPPED') {
    const named = /revision ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/i.exec(message)?.[1];
    let newer = named ?? null;
    if (!newer) {
      const deployment = await client.getDeployment(target.deploymentId, signal).catch(() => null);
      if (deployment?.latest_revision_id && deployment.latest_revision_id !== revision.id) newer = deployment.latest_revision_id;
    }
    result.supersededBy = newer;
    result.reason = `Revision ${revision.id} was superseded${newer ? ` by the newer revision ${newer}` : ''} before it started, so it was SKIPPED and not deployed. ${message}`;
  }
  // Logs are a help, not the verdict: failing to read them must not hide the reason.
  for (const type of ['build', 'deploy'] as const) {
    result.logs[type] = await client.lastLogLines(target.deploymentId, target.revisionId, type, LOG_LINES, signal).catch(() => []);
  }
}

function recordError(result: DeployResult, error: unknown, signal: AbortSignal | undefined): void {
  if (signal?.aborted) {
    result.outcome = 'cancelled';
    result.reason = 'The run was cancelled before the revision ended.';
    return;
  }
  result.outcome = 'error';
  result.reason = error instanceof Error ? error.message : String(error);
  if (error instanceof InputError) result.errorKind = 'input';
  else if (error instanceof TransientError) result.errorKind = 'unreachable';
  else if (error instanceof ApiError || error instanceof ResponseShapeError) result.errorKind = 'api';
  else throw error;
}

/** 90000 → "1m30s". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const total = Math.round(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  return [h ? `${h}h` : '', m ? `${m}m` : '', s ? `${s}s` : ''].join('') || '0s';
}
