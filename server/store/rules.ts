import type { DeploymentStatus } from '../../shared/schemas/deployment.ts';
import type { RevisionStatus } from '../../shared/schemas/revision.ts';
import type { RevisionRecord } from './types.ts';

/**
 * A write the store refused because it would break a uniqueness rule, or because what it changes
 * is not there. The store says which; the domain's `StoreRules.refusal` words it for users.
 */
export type Refusal =
  | { kind: 'workspace_name_taken'; name: string }
  | { kind: 'deployment_name_taken'; name: string }
  | { kind: 'deployment_not_found'; id: string }
  | { kind: 'listener_compute_id_taken'; computeId: string }
  | { kind: 'installation_linked_elsewhere'; installationId: number }
  /** A GitHub link attempt (or the install URL's state it came with) was used up by another confirmation first. */
  | { kind: 'link_attempt_used' }
  | { kind: 'installation_linked_here'; installationId: number }
  | { kind: 'oauth_provider_taken'; providerId: string };

/** A deployment's queue as the start of its next revision reads it, locked against other starts. */
export type QueueState = {
  deploymentStatus: DeploymentStatus;
  /** Revisions of the deployment started and not finished. */
  inProgress: number;
  /** Its queued revisions, newest first. */
  queued: RevisionRecord[];
};

/** What to start (null: nothing) and what to skip, each with the message its users read. */
export type StartPlan = { start: RevisionRecord | null; skip: Array<{ id: string; message: string }> };

/** How the next revision of a deployment starts: which (`planStart`) and in which stage (`firstStage`). */
export type StartRules = {
  planStart(state: QueueState): StartPlan;
  firstStage(revision: RevisionRecord): RevisionStatus;
};

/**
 * The decisions and words the store needs but does not own: the domain gives them to the store
 * when it is opened (`server/domain/store-rules.ts`), so the rules live in one place and the store
 * only reads and writes.
 */
export interface StoreRules {
  /** The error a refused write is thrown as. */
  refusal(refusal: Refusal): Error;
  /** Which queued revision starts now, and which are skipped. */
  planStart(state: QueueState): StartPlan;
}

/** Thrown for a refused write by a store opened without the domain's rules (tools, some tests). */
export class StoreRefusal extends Error {
  override readonly name = 'StoreRefusal';
  readonly refusal: Refusal;
  constructor(refusal: Refusal) {
    super(`The store refused the write: ${JSON.stringify(refusal)}`);
    this.refusal = refusal;
  }
}

/** The rules of a store opened without the domain's: refusals as `StoreRefusal`, and no revision is started. */
export const NO_RULES: StoreRules = {
  refusal: (refusal) => new StoreRefusal(refusal),
  planStart: () => {
    throw new Error('This store was opened without the domain rules, which decide what a deployment starts.');
  },
};
