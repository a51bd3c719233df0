import { previewOfDeployment } from '../domain/deployments.ts';
import type { DeploymentRecord } from '../store/types.ts';

/** A GitHub deployment's states, and a commit status's. */
export type DeploymentState = 'queued' | 'in_progress' | 'success' | 'failure' | 'error' | 'inactive';
export type CommitState = 'pending' | 'success' | 'failure' | 'error';

/** A check run's phase: its status while it runs, its conclusion once completed. */
export type CheckState = 'queued' | 'in_progress' | 'success' | 'failure' | 'cancelled';

/**
 * What one revision change tells GitHub: a deployment status, and a commit status or (where the
 * installation grants `checks: write`) the check run's state, with one sentence.
 */
export type StatusPlan = {
  deployment: DeploymentState | null;
  commit: CommitState | null;
  check: CheckState | null;
  description: string;
  replacesOthers: boolean;
};

/** GitHub refuses a description longer than this (422), for deployment and commit statuses alike. */
export const MAX_DESCRIPTION = 140;

/**
 * The GitHub side of a revision status (or `DELETED`: its deployment is being deleted). The
 * stages between queued and the end are all `in_progress` (sent once); a commit status is
 * `pending` from the first event to the end. `replacesOthers`: the deployment's earlier GitHub
 * deployments become `inactive`.
 */
export function planFor(event: string, statusMessage: string | null): StatusPlan | null {
  const detail = (text: string) => describe(statusMessage ? `${text}: ${statusMessage}` : text);
  switch (event) {
    case 'QUEUED':
    case 'AWAITING_BUILD':
      return { deployment: 'queued', commit: 'pending', check: 'queued', description: 'Queued', replacesOthers: false };
    case 'BUILDING':
      return { deployment: 'in_progress', commit: 'pending', check: 'in_progress', description: 'Building', replacesOthers: false };
    case 'AWAITING_DEPLOY':
    case 'DEPLOYING':
      return { deployment: 'in_progress', commit: 'pending', check: 'in_progress', description: 'Deploying', replacesOthers: false };
    case 'DEPLOYED':
      return { deployment: 'success', commit: 'success', check: 'success', description: 'Deployed', replacesOthers: true };
    case 'CREATE_FAILED':
    case 'BUILD_FAILED':
      return { deployment: 'failure', commit: 'failure', check: 'failure', description: detail('Build failed'), replacesOthers: false };
    case 'DEPLOY_FAILED':
      return { deployment: 'failure', commit: 'failure', check: 'failure', description: detail('Deploy failed'), replacesOthers: false };
    case 'INTERRUPTED':
    case 'SKIPPED':
      return {
        deployment: 'error',
        commit: 'error',
        check: 'cancelled',
        description: 'Replaced by a newer revision before it was deployed',
        replacesOthers: false,
      };
    case 'DELETED':
      return { deployment: 'inactive', commit: null, check: null, description: 'The deployment was deleted', replacesOthers: false };
    default:
      return null;
  }
}

/**
 * The deployment status actually posted for a plan: the phases GitHub already shows are not told
 * twice (docs/decisions/github-round-2.md, "Calls per push"). `queued` is the deployment's creation
 * itself (a GitHub deployment with no status yet is waiting); with check runs, `in_progress` is the
 * check run's (its details link opens the same page). Outcomes and `inactive` are always posted.
 */
export function postedDeploymentState(plan: StatusPlan, withChecks: boolean): DeploymentState | null {
  if (plan.deployment === 'queued') return null;
  if (plan.deployment === 'in_progress' && withChecks) return null;
  return plan.deployment;
}

/**
 * The GitHub environment of a deployment's revisions. All previews of a deployment share one
 * environment, `<parent>/preview`, each its own transient deployment there: a repository gains one
 * environment per deployment, not one per pull request.
 */
export function githubEnvironmentOf(deployment: DeploymentRecord): { environment: string; transient: boolean; production: boolean } {
  const previewOf = previewOfDeployment(deployment);
  const suffix = previewOf ? `-pr-${previewOf.pull_request}` : '';
  const environment = previewOf && deployment.name.endsWith(suffix) ? `${deployment.name.slice(0, -suffix.length)}/preview` : deployment.name;
  return { environment, transient: previewOf !== null, production: previewOf === null && deployment.source_config.deployment_type === 'prod' };
}

/** One line of at most 140 characters (GitHub's limit), cut with an ellipsis. */
export function describe(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= MAX_DESCRIPTION ? line : `${line.slice(0, MAX_DESCRIPTION - 1)}…`;
}
