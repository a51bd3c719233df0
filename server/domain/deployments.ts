import {
  type BulkDeleteResult,
  type Deployment,
  type DeploymentCreate,
  type DeploymentListQuery,
  type DeploymentPatch,
  isTagRef,
  type RevisionCreate,
  revisionConfig,
  type SourceConfig,
  type SourceRevisionConfig,
} from '../../shared/schemas/deployment.ts';
import { MASKED_SECRET_VALUE, type Secret } from '../../shared/schemas/secret.ts';
import type { Clock } from '../lib/clock.ts';
import { auditSubject } from '../lib/request-scope.ts';
import { timeOrderedId } from '../lib/time-ordered-id.ts';
import { createdRevisionWork } from '../store/rows.ts';
import type { DeploymentChange, DeploymentRecord, ListenerRecord, NewRevision, Page, RevisionRecord, Store } from '../store/types.ts';
import { BadRequest, NotFound } from './errors.ts';
import { refuseWhatK8sWouldNot } from './k8s-spec-rules.ts';
import { urlLabel } from './names.ts';
import { type CreatePlan, firstStage, type Pipeline } from './pipeline.ts';
import { planSourceCreate, SOURCES } from './sources/index.ts';
import type { PatchRules, PreviewOf, StoredSourceConfig } from './sources/source-module.ts';

export type DeploymentsDeps = {
  store: Store;
  clock: Clock;
  pipeline: Pipeline;
  deploymentDomain: string;
  allowFileRepoUrls: boolean;
  /** `GITHUB_URL`: the one host whose repositories may be named over http:// (when it is http:// itself). */
  githubUrl?: string;
  /** Whether `objectPath` is a completed upload of this deployment (`POST …/upload-url`, then `PUT`). */
  tarballUploaded: (deploymentId: string, objectPath: string) => Promise<boolean>;
};

/** Fixed at creation; a PATCH may repeat the stored value but not change it. */
const IMMUTABLE_SOURCE_CONFIG_FIELDS = ['integration_id', 'repo_url', 'deployment_type', 'listener_id'] as const;

/** The deployment as the API shows it: secret values masked, both names of the graph config path. */
export function publicDeployment(deployment: DeploymentRecord): Deployment {
  const { delete_tracing_project: _internal, ...shown } = deployment;
  const previewOf = previewOfDeployment(deployment);
  if (previewOf) {
    // Kept inside the stored source_config (no column of its own); shown as the deployment's own fields.
    const { preview_of: _kept, ...sourceConfig } = deployment.source_config as StoredSourceConfig;
    shown.source_config = sourceConfig;
    shown.parent_deployment_id = previewOf.parent_deployment_id;
    shown.pull_request = previewOf.pull_request;
  }
  return {
    ...shown,
    source_revision_config: revisionConfig(deployment.source_revision_config),
    secrets: deployment.secrets.map((secret) => ({ name: secret.name, value: MASKED_SECRET_VALUE })),
  };
}

export type { PreviewOf } from './sources/source-module.ts';

/** The parent and pull request of a preview deployment; null for any other deployment. */
export function previewOfDeployment(deployment: Pick<DeploymentRecord, 'source_config'>): PreviewOf | null {
  return (deployment.source_config as StoredSourceConfig).preview_of ?? null;
}

export class Deployments {
  readonly #deps: DeploymentsDeps;

  constructor(deps: DeploymentsDeps) {
    this.#deps = deps;
  }

  /**
   * `previewOf`: the deployment is a pull-request preview of that parent, its first revision built
   * from `commitSha` (both given by the preview service only).
   */
  async create(tenantId: string, body: DeploymentCreate, options: { previewOf?: PreviewOf; commitSha?: string } = {}): Promise<DeploymentRecord> {
    const { store, clock, pipeline } = this.#deps;
    const now = clock.now();
    const id = timeOrderedId();
    auditSubject(id);
    // 8 random hex digits: the start of a v4 UUID is random, and randomUUID draws from a pooled
    // buffer where randomBytes(4) makes a system call per create.
    const serverUrl = () => `https://${urlLabel(body.name, crypto.randomUUID().slice(0, 8))}.${this.#deps.deploymentDomain}`;
    const planned = await planSourceCreate(body, {
      tenantId,
      store,
      serverUrl,
      allowFileRepoUrls: this.#deps.allowFileRepoUrls,
      githubUrl: this.#deps.githubUrl,
      previewOf: options.previewOf,
      commitSha: options.commitSha,
    });
    const { sourceConfig, revisionConfig: config } = planned;
    const revisionId = planned.firstRevision ? timeOrderedId() : null;
    const secrets = body.secrets ?? [];
    const deployment = {
      id,
      tenant_id: tenantId,
      name: body.name,
      source: body.source,
      source_config: sourceConfig,
      source_revision_config: config,
      secrets,
      created_at: now,
      updated_at: now,
      status: 'AWAITING_DATABASE' as const,
      latest_revision_id: revisionId,
      active_revision_id: null,
      image_version: body.image_version ?? null,
    };
    let revision: NewRevision | null = null;
    let plan: CreatePlan | null = null;
    if (revisionId) {
      revision = {
        id: revisionId,
        trigger: 'create',
        source_revision_config: config,
        secrets,
        resource_spec: sourceConfig.resource_spec,
        status: firstStage({ source: body.source }),
      };
      // The data plane's first step goes into the create's own transaction: one commit per create.
      plan = await pipeline.planCreate(
        tenantId,
        deployment,
        { status: revision.status!, source_revision_config: config, resource_spec: revision.resource_spec },
        planned.servingComputeType,
      );
      if (plan.step) revision = { ...revision, status: plan.step.to, logs: plan.step.logs };
    }
    const created = await store.createDeployment({
      deployment,
      revision,
      tracingProject: { id: timeOrderedId(), name: body.name, tenant_id: tenantId, deployment_id: id, created_at: now },
      runner: plan?.runner,
    });
    if (revision && plan) await pipeline.startedOnCreate(plan, createdRevisionWork(deployment, revision), created.deployment, created.revisionHeld);
    return created.deployment;
  }

  async get(tenantId: string, id: string): Promise<DeploymentRecord> {
    const deployment = await this.#deps.store.getDeployment(tenantId, id);
    if (!deployment) throw new NotFound(`Deployment ID ${id} not found.`);
    return deployment;
  }

  list(tenantId: string, query: DeploymentListQuery): Promise<Page<DeploymentRecord>> {
    return this.#deps.store.listDeployments(tenantId, query);
  }

  /** Applies the seed's PATCH rules; answers the deployment and the revision it created, if any. */
  async patch(tenantId: string, id: string, body: DeploymentPatch): Promise<{ deployment: DeploymentRecord; revision: RevisionRecord | null }> {
    const { store, clock, pipeline } = this.#deps;
    await this.#checkTarball(tenantId, id, body.source_revision_config?.source_tarball_path);
    const listener = await this.#k8sListenerOf(tenantId, id);
    const result = await store.updateDeployment(tenantId, id, (current) => checkedForK8s(listener, current, planPatch(current, body)), clock.now());
    if (result.revision) await pipeline.advance(id);
    return result;
  }

  /** `POST …/revisions`: a new revision from the PATCH's revision fields; none given rebuilds the latest config. */
  async createRevision(tenantId: string, id: string, body: RevisionCreate): Promise<RevisionRecord> {
    const { store, clock, pipeline } = this.#deps;
    await this.#checkTarball(tenantId, id, body.source_revision_config?.source_tarball_path);
    const listener = await this.#k8sListenerOf(tenantId, id);
    const result = await store.updateDeployment(
      tenantId,
      id,
      (current) => checkedForK8s(listener, current, planPatch(current, body, { alwaysRevision: true })),
      clock.now(),
    );
    await pipeline.advance(id);
    return (await store.getRevisionById(result.revision!.id)) ?? result.revision!;
  }

  /** The k8s listener a deployment runs on (its listener never changes), or null for any other. */
  async #k8sListenerOf(tenantId: string, id: string): Promise<ListenerRecord | null> {
    const deployment = await this.#deps.store.getDeployment(tenantId, id);
    const listenerId = deployment?.source === 'external_docker' ? deployment.source_config.listener_id : null;
    const listener = listenerId ? await this.#deps.store.getListener(tenantId, listenerId) : null;
    return listener?.compute_type === 'k8s' ? listener : null;
  }

  /** Upload URLs are for `internal_source`, push tokens for `internal_docker` deployments (400 for others). */
  refuseUnlessSource(deployment: DeploymentRecord, source: Deployment['source'], what: string): void {
    refuseWhileDeleting(deployment);
    if (deployment.source !== source)
      throw new BadRequest(`${what} is for ${source} deployments; deployment ${deployment.id} has source ${deployment.source}.`);
  }

  /** A `source_tarball_path` must name a finished upload of this very deployment (400 otherwise). */
  async #checkTarball(tenantId: string, id: string, objectPath: string | null | undefined): Promise<void> {
    if (objectPath == null) return;
    await this.get(tenantId, id);
    if (!(await this.#deps.tarballUploaded(id, objectPath))) {
      throw new BadRequest(
        `source_tarball_path '${objectPath}' is not a tarball uploaded for deployment ${id}; upload one with POST /v2/deployments/${id}/upload-url first.`,
      );
    }
  }

  /** Deletes each deployment on its own: one that fails does not stop the others. */
  async deleteMany(tenantId: string, ids: string[], deleteTracingProject: boolean): Promise<BulkDeleteResult> {
    const result: BulkDeleteResult = { deleted: [], failed: [] };
    for (const id of new Set(ids)) {
      try {
        await this.delete(tenantId, id, deleteTracingProject);
        result.deleted.push(id);
      } catch (error) {
        if (!(error instanceof NotFound) && !(error instanceof BadRequest)) throw error;
        result.failed.push({ id, detail: error.message });
      }
    }
    return result;
  }

  /** A new revision with the source revision config and secrets of an earlier one (a rollback). */
  async redeploy(tenantId: string, id: string, revisionId: string): Promise<DeploymentRecord> {
    const { store, clock, pipeline } = this.#deps;
    const found = await store.getRevision(tenantId, id, revisionId);
    const earlier = found ? await store.getRevisionWork(found.id) : null;
    if (!earlier) {
      if (!(await store.getDeployment(tenantId, id))) throw new NotFound(`Deployment ID ${id} not found.`);
      throw new NotFound(`Revision ID ${revisionId} not found.`);
    }
    const result = await store.updateDeployment(
      tenantId,
      id,
      (current): DeploymentChange => {
        refuseWhileDeleting(current);
        return {
          source_config: current.source_config,
          source_revision_config: earlier.source_revision_config,
          secrets: earlier.secrets,
          revision: {
            id: timeOrderedId(),
            trigger: 'redeploy',
            source_revision_config: earlier.source_revision_config,
            secrets: earlier.secrets,
            resource_spec: current.source_config.resource_spec,
          },
        };
      },
      clock.now(),
    );
    await pipeline.advance(id);
    return result.deployment;
  }

  /** Marks the deployment `AWAITING_DELETE` and tears it down in the background. */
  async delete(tenantId: string, id: string, deleteTracingProject: boolean, force = false): Promise<void> {
    const { store, clock, pipeline } = this.#deps;
    const result = await store.markDeploymentDeleting(tenantId, id, deleteTracingProject, clock.now());
    if (!result) throw new NotFound(`Deployment ID ${id} not found.`);
    // `force` on a repeated DELETE: its teardown stops waiting for a listener agent that may never come back.
    if (force && !result.marked) await pipeline.forceTeardown(id);
    // A repeated DELETE restarts a teardown that failed; one still running is left alone.
    if (result.marked || !pipeline.isTearingDown(id)) pipeline.startTeardown(result.deployment);
  }
}

/** A change on a k8s listener's deployment that makes a revision, checked as at create (contract §18). */
function checkedForK8s(listener: ListenerRecord | null, current: DeploymentRecord, change: DeploymentChange): DeploymentChange {
  if (listener && change.revision) {
    refuseWhatK8sWouldNot(listener, {
      spec: change.source_config.resource_spec,
      secrets: change.secrets,
      previous: current.source_config.resource_spec,
      creating: false,
    });
  }
  return change;
}

function refuseWhileDeleting(current: DeploymentRecord): void {
  if (current.status === 'AWAITING_DELETE') throw new BadRequest(`Deployment ${current.id} is being deleted and cannot be changed.`);
}

/**
 * The seed's PATCH rules, decided against the stored deployment: fields the source does not take
 * and changes to immutable fields are 400; a non-null `repo_ref`, `graph_config_path`,
 * `image_uri`, `source_tarball_path`, `secrets` or `resource_spec` creates exactly one revision
 * (`alwaysRevision`: one is created in any case, for `POST …/revisions`).
 */
export function planPatch(current: DeploymentRecord, body: DeploymentPatch | RevisionCreate, options: { alwaysRevision?: boolean } = {}): DeploymentChange {
  refuseWhileDeleting(current);
  const sourceConfig: DeploymentPatch['source_config'] & object = body.source_config ?? {};
  const revisionFields: Partial<SourceRevisionConfig> = body.source_revision_config ?? {};
  const source = current.source;

  if (body.revision_source != null && body.revision_source !== source) {
    throw new BadRequest(`revision_source ${body.revision_source} does not match the deployment's source ${source}.`);
  }
  const rules: PatchRules = SOURCES[source];
  for (const [field, value] of Object.entries(sourceConfig)) {
    if (value === null || value === undefined) continue;
    if (field === 'custom_url' && rules.serverSetsUrl) {
      throw new BadRequest(`source_config.custom_url is set by the server for ${source} deployments and is read-only.`);
    }
    if (!rules.sourceConfigFields.has(field)) {
      throw new BadRequest(`source_config.${field} is not allowed for a ${source} deployment.`);
    }
  }
  for (const [field, value] of Object.entries(revisionFields)) {
    if (value === null || value === undefined) continue;
    if (!rules.revisionConfigFields.has(field)) {
      throw new BadRequest(`source_revision_config.${field} is not allowed for a ${source} deployment.`);
    }
  }
  for (const field of IMMUTABLE_SOURCE_CONFIG_FIELDS) {
    const wanted = sourceConfig[field];
    if (wanted !== null && wanted !== undefined && wanted !== current.source_config[field]) {
      throw new BadRequest(`source_config.${field} cannot be changed after the deployment is created.`);
    }
  }
  const namespace = sourceConfig.listener_config?.k8s_namespace;
  if (namespace !== null && namespace !== undefined && namespace !== (current.source_config.listener_config?.k8s_namespace ?? null)) {
    throw new BadRequest('source_config.listener_config.k8s_namespace cannot be changed after the deployment is created.');
  }

  const nextSourceConfig: SourceConfig = {
    ...current.source_config,
    build_on_push: sourceConfig.build_on_push ?? current.source_config.build_on_push,
    custom_url: sourceConfig.custom_url ?? current.source_config.custom_url,
    install_command: sourceConfig.install_command ?? current.source_config.install_command,
    build_command: sourceConfig.build_command ?? current.source_config.build_command,
    resource_spec: sourceConfig.resource_spec ?? current.source_config.resource_spec,
    ...(sourceConfig.preview ? { preview: sourceConfig.preview } : {}),
  };
  const stored = current.source_revision_config;
  const nextRevisionConfig = revisionConfig({
    repo_ref: revisionFields.repo_ref ?? stored.repo_ref,
    graph_config_path: revisionFields.graph_config_path ?? stored.graph_config_path,
    image_uri: revisionFields.image_uri ?? stored.image_uri,
    source_tarball_path: revisionFields.source_tarball_path ?? stored.source_tarball_path,
    repo_commit_sha: stored.repo_commit_sha,
  });
  if (nextSourceConfig.build_on_push === true && isTagRef(nextRevisionConfig.repo_ref)) {
    throw new BadRequest('build_on_push cannot be true while repo_ref is a tag (refs/tags/...).');
  }

  const nextSecrets = body.secrets ? resolveMaskedSecrets(body.secrets, current.secrets) : current.secrets;
  const createsRevision =
    options.alwaysRevision === true ||
    revisionFields.repo_ref != null ||
    revisionFields.graph_config_path != null ||
    revisionFields.image_uri != null ||
    revisionFields.source_tarball_path != null ||
    body.secrets != null ||
    sourceConfig.resource_spec != null;
  if (!createsRevision) {
    return { source_config: nextSourceConfig, source_revision_config: current.source_revision_config, secrets: current.secrets, revision: null };
  }
  // The client-built sources have nothing to build or run until a tarball or an image is named.
  rules.refuseUnbuildable?.(nextRevisionConfig);
  // A new revision builds its ref afresh: the commit it gets is not known until it is built.
  const newRevisionConfig: SourceRevisionConfig = { ...nextRevisionConfig, repo_commit_sha: null };
  return {
    source_config: nextSourceConfig,
    source_revision_config: newRevisionConfig,
    secrets: nextSecrets,
    revision: {
      id: timeOrderedId(),
      trigger: 'patch',
      source_revision_config: newRevisionConfig,
      secrets: nextSecrets,
      resource_spec: nextSourceConfig.resource_spec,
    },
  };
}

/** A secret sent back with the mask as its value keeps its stored value. */
function resolveMaskedSecrets(sent: Secret[], stored: Secret[]): Secret[] {
  return sent.map((secret) => {
    if (secret.value !== MASKED_SECRET_VALUE) return secret;
    const kept = stored.find((candidate) => candidate.name === secret.name);
    if (!kept) throw new BadRequest(`secrets: '${secret.name}' has the masked placeholder as its value but no stored value to keep.`);
    return kept;
  });
}
