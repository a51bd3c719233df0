import type { QueueState, Refusal, StartPlan, StoreRules } from '../store/rules.ts';
import type { RevisionRecord } from '../store/types.ts';
import { Conflict, NotFound } from './errors.ts';

/**
 * The pipeline's one-at-a-time rule: while a revision of the deployment is in progress nothing
 * starts; a deployment being deleted starts nothing (its teardown interrupts what is queued);
 * otherwise the newest queued revision starts and every older queued one is skipped as superseded.
 */
export function planStart(state: QueueState): StartPlan {
  if (state.inProgress > 0 || state.deploymentStatus === 'AWAITING_DELETE') return { start: null, skip: [] };
  const [newest, ...older] = state.queued;
  if (!newest) return { start: null, skip: [] };
  return { start: newest, skip: older.map((revision) => ({ id: revision.id, message: supersededMessage(newest) })) };
}

/** Why a queued revision was skipped; a push names the commit that superseded it, so a burst reads clearly. */
export function supersededMessage(newer: RevisionRecord): string {
  const sha = newer.source_revision_config.repo_commit_sha;
  if (newer.trigger === 'push' && sha) {
    return `Superseded by revision ${newer.id} (push of commit ${sha.slice(0, 12)}), which was created later: only the newest queued revision is built.`;
  }
  return `Superseded by revision ${newer.id}, which was created later.`;
}

/** A write the store refused, as the error (and words) the API answers with. */
export function refusalError(refusal: Refusal): Error {
  switch (refusal.kind) {
    case 'workspace_name_taken':
      return new Conflict(`A workspace named '${refusal.name}' already exists.`);
    case 'deployment_name_taken':
      return new Conflict(`A deployment or tracing project named '${refusal.name}' already exists in this workspace.`);
    case 'deployment_not_found':
      return new NotFound(`Deployment ID ${refusal.id} not found.`);
    case 'listener_compute_id_taken':
      return new Conflict(`A listener with compute_id '${refusal.computeId}' already exists in this workspace.`);
    case 'link_attempt_used':
      return new Conflict('This link was already used. Start again from the install URL.');
    case 'installation_linked_elsewhere':
      return new Conflict(`Installation ${refusal.installationId} is linked to another organization.`);
    case 'installation_linked_here':
      return new Conflict(`Installation ${refusal.installationId} is already linked to this workspace.`);
    case 'oauth_provider_taken':
      return new Conflict(`An OAuth provider with provider_id '${refusal.providerId}' already exists in this organization.`);
    default: {
      const unhandled: never = refusal;
      throw new Error(`Unhandled refusal ${JSON.stringify(unhandled)}`);
    }
  }
}

/** What the stores are opened with: the rules above. */
export const DOMAIN_STORE_RULES: StoreRules = { refusal: refusalError, planStart };
