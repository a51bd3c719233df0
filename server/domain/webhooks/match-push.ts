import type { EmitterWebhookEvent } from '@octokit/webhooks';
import { normalizeRepoUrl } from '../../../shared/repo-url.ts';
import type { DeploymentRecord, IntegrationRecord } from '../../store/types.ts';

export type PushPayload = EmitterWebhookEvent<'push'>['payload'];

const ZERO_SHA = /^0+$/;
const SKIP_MARKERS = /\[(skip ci|ci skip|skip deploy|deploy skip)\]/i;
const BRANCH_PREFIX = 'refs/heads/';

/** The facts of a push that matching needs, read once from the typed payload. */
export type PushFacts = {
  ref: string;
  after: string;
  deleted: boolean;
  /** Normalised forms of every URL GitHub gives for the repository. */
  repoKeys: string[];
  repository: string;
  installationId: number | null;
  headMessage: string | null;
};

/**
 * Reads the facts of a push from its typed payload; null when the fields matching needs are
 * missing (a signed body is GitHub's, but its shape is still checked before it is trusted).
 */
export function pushFacts(payload: PushPayload): PushFacts | null {
  const repo = payload.repository as Partial<PushPayload['repository']> | undefined;
  if (typeof payload.ref !== 'string' || typeof payload.after !== 'string' || !repo || typeof repo.full_name !== 'string') return null;
  const urls = [repo.html_url, repo.clone_url, repo.ssh_url, repo.git_url].filter((u): u is string => typeof u === 'string' && u.length > 0);
  const installationId = payload.installation?.id;
  const message = payload.head_commit?.message;
  return {
    ref: payload.ref,
    after: payload.after,
    deleted: payload.deleted === true || ZERO_SHA.test(payload.after),
    repoKeys: [...new Set(urls.map(normalizeRepoUrl))],
    repository: repo.full_name,
    installationId: typeof installationId === 'number' ? installationId : null,
    headMessage: typeof message === 'string' ? message : null,
  };
}

const COMMIT_SHA = /^[0-9a-f]{40}$/;

/** A value quoted in a reason, short whatever was sent. */
function quote(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * Why a signed push cannot be built from at all, or null: missing fields, an `after` that is not
 * a commit SHA (it would be stored as one and handed to a build), or an `installation.id` that is
 * not a number (the delivery could not be addressed, and must not fall back to "no installation").
 */
export function pushProblem(payload: PushPayload): string | null {
  const fields = payload as unknown as Record<string, unknown>;
  const repo = fields.repository as { full_name?: unknown } | null | undefined;
  if (typeof fields.ref !== 'string' || typeof fields.after !== 'string' || typeof repo?.full_name !== 'string') {
    return 'Not buildable: the push payload lacks ref, after or repository.full_name.';
  }
  if (!COMMIT_SHA.test(fields.after)) return `Not buildable: after ${quote(fields.after)} is not a 40-character hexadecimal commit SHA.`;
  if (fields.installation !== undefined && fields.installation !== null) {
    const id = (fields.installation as { id?: unknown }).id;
    if (!Number.isSafeInteger(id) || (id as number) <= 0) {
      return `Not buildable: installation.id ${quote(id)} is not a number, so the delivery cannot be matched to an installation.`;
    }
  }
  return null;
}

/** A reason that rules out every deployment at once (deletion, tag, skip marker), or null. */
export function pushWideSkip(push: PushFacts): string | null {
  if (push.deleted) return `The push deleted ${push.ref}: a deletion never builds.`;
  if (push.ref.startsWith('refs/tags/')) return `The push was of the tag ${push.ref}: deployments track branches, never tags.`;
  if (!push.ref.startsWith(BRANCH_PREFIX)) return `The push was to ${push.ref}, which is not a branch.`;
  const marker = push.headMessage ? SKIP_MARKERS.exec(push.headMessage) : null;
  if (marker) return `The head commit's message carries ${marker[0]}: nothing is built for it.`;
  return null;
}

/** The branch a deployment tracks, from its `repo_ref` (`main` or `refs/heads/main`); null for a tag. */
export function trackedBranch(repoRef: string | null): string | null {
  if (!repoRef || repoRef.startsWith('refs/tags/')) return null;
  return repoRef.startsWith(BRANCH_PREFIX) ? repoRef.slice(BRANCH_PREFIX.length) : repoRef;
}

/** Why a deployment's integration keeps it from push builds, or null when it may build. */
export function integrationBlock(deployment: DeploymentRecord, integration: IntegrationRecord | null): string | null {
  if (!deployment.source_config.integration_id || !integration || integration.tenant_id !== deployment.tenant_id) {
    return 'Its GitHub integration no longer exists (the installation was deleted or unlinked): no push builds until it is linked again.';
  }
  if (integration.suspended)
    return `Its GitHub integration (installation ${integration.installation_id}) is suspended: no push builds until it is unsuspended.`;
  return null;
}

/**
 * Why this push does not build this deployment (same repository, already established), or null
 * when it should. The commit check (one revision per commit) is the store's, in its transaction.
 */
export function deploymentSkip(deployment: DeploymentRecord, integration: IntegrationRecord | null, push: PushFacts): string | null {
  if (deployment.status === 'AWAITING_DELETE') return 'The deployment is being deleted.';
  if (!deployment.source_config.build_on_push) return 'build_on_push is false for this deployment.';
  const branch = trackedBranch(deployment.source_revision_config.repo_ref);
  const pushed = push.ref.slice(BRANCH_PREFIX.length);
  if (branch === null) return `The deployment tracks the tag ${deployment.source_revision_config.repo_ref}, not a branch.`;
  if (branch !== pushed) return `The deployment tracks branch ${branch}; the push was to ${pushed}.`;
  if (push.installationId !== null && integration && integration.installation_id !== push.installationId) {
    return `The deployment's integration is for installation ${integration.installation_id}; the delivery came from installation ${push.installationId}.`;
  }
  return integrationBlock(deployment, integration);
}
