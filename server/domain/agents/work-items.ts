import type { WorkDeployment, WorkItem, WorkRevision, WorkSource } from '../../../shared/schemas/agent.ts';
import { UNFINISHED_REVISION_STATUSES } from '../../../shared/schemas/revision.ts';
import type { ClaimRecord } from '../../store/agents.ts';
import type { DeploymentRecord, DeploymentStore, ListenerRecord, ListenerStore, RevisionStore, RevisionWork } from '../../store/types.ts';
import { dnsSafeName } from '../names.ts';
import type { Pipeline } from '../pipeline.ts';
import { type RepositoryAccess, TokenRefused } from '../repository-access.ts';
import type { Uploads } from '../uploads.ts';

export type WorkItemDeps = {
  store: Pick<DeploymentStore, 'getDeploymentById'> & Pick<RevisionStore, 'getRevisionWork'> & Pick<ListenerStore, 'getListenerById'>;
  pipeline: Pick<Pipeline, 'transition'>;
  leaseMs: number;
  uploads: Pick<Uploads, 'fetchUrl'>;
  repoAccess?: RepositoryAccess;
};

/**
 * What an agent is handed with a claim (contract §9): the deployment, the revision with its
 * secrets, where to fetch its source (the repository with an installation token minted for the
 * claim, or a signed URL of the uploaded tarball), and what a k8s listener renders.
 */
export class WorkItems {
  readonly #deps: WorkItemDeps;

  constructor(deps: WorkItemDeps) {
    this.#deps = deps;
  }

  /** What a claim hands its agent; null when its deployment or revision is gone, or the revision failed for want of credentials. */
  async forClaim(claim: ClaimRecord): Promise<WorkItem | null> {
    const { store } = this.#deps;
    const deployment = await store.getDeploymentById(claim.deployment_id);
    if (!deployment) return null;
    const lease = { claim_id: claim.claim_id, lease_expires_at: claim.lease_expires_at, lease_ms: this.#deps.leaseMs };
    if (claim.kind === 'teardown') return { kind: 'teardown', ...lease, deployment: workDeployment(deployment) };
    const revision = claim.revision_id ? await store.getRevisionWork(claim.revision_id) : null;
    if (!revision) return null;
    // The tarball's fetch URL is bound to this claim: it stops working when the claim ends.
    const sourceUrl = this.#deps.uploads.fetchUrl(sourcePath(claim.listener_id, claim.claim_id), sourceSubject(claim.listener_id, claim.claim_id));
    const work = workRevision(revision, deployment, sourceUrl);
    if (work.source.type === 'git' && this.#deps.repoAccess) {
      // Minted for this claim and handed over only inside it: the agent gives it to git and nothing else.
      let credentials: Awaited<ReturnType<RepositoryAccess['credentials']>>;
      try {
        credentials = await this.#deps.repoAccess.credentials(work.source.repo_url, deployment.source_config.integration_id, {
          deployment_id: deployment.id,
          revision_id: revision.id,
        });
      } catch (error) {
        if (!(error instanceof TokenRefused)) throw error;
        // Refused until someone changes the installation on GitHub: the revision fails now, saying what to change.
        await this.#deps.pipeline.transition({
          revisionId: revision.id,
          from: UNFINISHED_REVISION_STATUSES,
          to: 'BUILD_FAILED',
          statusMessage: error.message,
          logs: [{ type: 'build', level: 'error', message: error.message }],
        });
        return null;
      }
      if (credentials) work.source = { ...work.source, repo_url: credentials.url, token: credentials.token };
    }
    const listener = await store.getListenerById(claim.listener_id);
    return { kind: 'revision', ...lease, deployment: { ...workDeployment(deployment), ...k8sSettings(listener) }, revision: work };
  }
}

export function workDeployment(deployment: DeploymentRecord): WorkDeployment {
  return {
    id: deployment.id,
    name: deployment.name,
    url_name: dnsSafeName(deployment.name),
    source: deployment.source,
    custom_url: deployment.source_config.custom_url,
    install_command: deployment.source_config.install_command,
    build_command: deployment.source_config.build_command,
    k8s_namespace: deployment.source_config.listener_config?.k8s_namespace ?? null,
  };
}

/** What a k8s agent renders from its listener (contract §18): the license Secret, whether own securityContexts are allowed. */
export function k8sSettings(listener: ListenerRecord | null): Pick<WorkDeployment, 'k8s_license_secret' | 'k8s_allow_privileged'> {
  if (listener?.compute_type !== 'k8s') return {};
  return {
    k8s_license_secret: listener.compute_config.k8s_license_secret ?? null,
    k8s_allow_privileged: listener.compute_config.k8s_allow_privileged ?? false,
  };
}

/** Where the agent fetches a claimed revision's uploaded tarball (routes/agent.ts serves it). */
export function sourcePath(listenerId: string, claimId: string): string {
  return `/v2/listeners/${listenerId}/agent/claims/${claimId}/source`;
}

/** What a source URL's signature binds: the listener and the claim. */
export function sourceSubject(listenerId: string, claimId: string): string {
  return `agent-source:${listenerId}:${claimId}`;
}

/** `sourceUrl`: the signed fetch URL of the claim; null outside a claim (`GET …/live` restarts from built directories). */
export function workRevision(revision: RevisionWork, deployment: DeploymentRecord, sourceUrl: string | null = null): WorkRevision {
  return {
    id: revision.id,
    status: revision.status,
    graph_config_path: revision.source_revision_config.graph_config_path,
    source: sourceOf(revision, deployment, sourceUrl),
    secrets: revision.secrets.map((s) => ({ name: s.name, value: s.value })),
    resource_spec: revision.resource_spec,
    traceparent: revision.traceparent,
  };
}

/**
 * Where the agent fetches what it builds: the repository (`github`), the uploaded tarball behind
 * a signed URL (`internal_source`), or the image (`external_docker`, `internal_docker`).
 */
export function sourceOf(revision: RevisionWork, deployment: DeploymentRecord, sourceUrl: string | null): WorkSource {
  const config = revision.source_revision_config;
  const source = revision.source ?? deployment.source;
  if (source === 'github') {
    return { type: 'git', repo_url: deployment.source_config.repo_url ?? '', ref: config.repo_ref, commit_sha: config.repo_commit_sha };
  }
  if (source === 'internal_source') return { type: 'tarball', url: sourceUrl };
  return { type: 'image', image_uri: config.image_uri ?? '' };
}
