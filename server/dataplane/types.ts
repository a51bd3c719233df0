import type { LogLevel, LogType } from '../../shared/schemas/revision.ts';
import type { DeploymentRecord, RevisionRecord, RevisionTransition, RevisionWork } from '../store/types.ts';

/** A revision about to be handed to a data plane in its first stage (AWAITING_BUILD or AWAITING_DEPLOY). */
export type FirstStepRevision = Pick<RevisionWork, 'status' | 'source_revision_config' | 'resource_spec'>;
export type FirstStepDeployment = Pick<DeploymentRecord, 'name' | 'source' | 'source_config'>;
/** The stage a data plane moves a revision to at once, and the log lines it writes as it does. */
export type FirstStep = { to: RevisionRecord['status']; logs: Array<{ type: LogType; level: LogLevel; message: string }> };

/**
 * What a data plane may do to the pipeline: move a revision on (a compare-and-set on its status,
 * so an interrupt always wins a race) and write log lines. A remote listener agent for `k8s`
 * listeners will reach the same two operations through its protocol.
 */
export type StageControl = {
  transition(change: RevisionTransition): Promise<RevisionRecord | null>;
  log(revisionId: string, type: 'build' | 'deploy', level: 'info' | 'warn' | 'error', message: string): Promise<void>;
};

/** Carries revisions through their stages on some compute, and tears deployments down. */
export interface DataPlane {
  readonly name: string;
  /**
   * Carries a started revision to an end, from whatever in-progress stage it is in (a restarted
   * server hands over revisions it finds mid-pipeline). Must not throw; failures end the revision.
   */
  run(revision: RevisionWork, deployment: DeploymentRecord, control: StageControl): void;
  /**
   * The step this data plane takes at once on a revision in its first stage, without waiting for
   * anything (its first write). Given, a new deployment's first revision is stored already past it.
   */
  firstStep?(revision: FirstStepRevision, deployment: FirstStepDeployment): FirstStep;
  /** Whether this data plane serves the deployment; the pipeline asks the listener agents' first. */
  serves?(deployment: DeploymentRecord): Promise<boolean>;
  /** Removes what the deployment runs; resolves when it is gone. */
  teardown(deployment: DeploymentRecord): Promise<void>;
  /** Ends the deployment's teardown now, whatever its data plane still runs (`DELETE …?force=true`); resolves once that is stored. */
  forceTeardown?(deploymentId: string): Promise<void>;
  /** Stops timers and work in flight (shutdown); the database keeps the state to resume from. */
  stop(): void;
}
