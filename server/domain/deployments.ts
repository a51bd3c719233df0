import { repositoryOnHost } from '../../shared/repo-url.ts';
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
import { createdRevisionWork } from '../store/rows.ts';
import type { DeploymentChange, DeploymentRecord, ListenerRecord, NewRevision, Page, RevisionRecord, Store } from '../store/types.ts';
import { BadRequest, NotFound, ValidationFailed } from './errors.ts';
import { refuseWhatK8sWouldNot } from './k8s-spec-rules.ts';
import { urlLabel } from './names.ts';
import { type CreatePlan, firstStage, type Pipeline } from './pipeline.ts';

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

/** Fields a source takes in `source_config` (the seed's "Applies to" column, and the hosted API's two sources). */
const SOURCE_CONFIG_FIELDS: Record<Deployment['source'], ReadonlySet<keyof SourceConfig>> = {
  github: new Set(['integration_id', 'repo_url', 'deployment_type', 'build_on_push', 'install_command', 'build_command', 'preview']),
  external_docker: new Set(['listener_id', 'listener_config', 'resource_spec', 'custom_url']),
  internal_source: new Set(['deployment_type', 'install_command', 'build_command', 'resource_spec']),
  internal_docker: new Set(['deployment_type', 'resource_spec']),
};
const REVISION_CONFIG_FIELDS: Record<Deployment['source'], ReadonlySet<string>> = {
  github: new Set(['repo_ref', 'graph_config_path']),
  external_docker: new Set(['image_uri']),
  internal_source: new Set(['graph_config_path', 'source_tarball_path']),
  internal_docker: new Set(['image_uri']),
};
/** Sources whose `custom_url` the server sets (read-only to clients). */
const SERVER_SET_URL = new Set<Deployment['source']>(['github', 'internal_source', 'internal_docker']);
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

/** A pull-request preview's parent and number, as its stored `source_config` keeps them. */
export type PreviewOf = { parent_deployment_id: string; pull_request: number };
type StoredSourceConfig = SourceConfig & { preview_of?: PreviewOf };

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
    const id = crypto.randomUUID();
    auditSubject(id);
    let revisionId: string | null = crypto.randomUUID();
    let sourceConfig: SourceConfig;
    let config: SourceRevisionConfig;
    // 8 random hex digits: the start of a v4 UUID is random, and randomUUID draws from a pooled
    // buffer where randomBytes(4) makes a system call per create.
    const serverUrl = () => `https://${urlLabel(body.name, crypto.randomUUID().slice(0, 8))}.${this.#deps.deploymentDomain}`;
    if (body.source === 'internal_source' || body.source === 'internal_docker') {
      // Created empty: `langgraph deploy` uploads or pushes next, and its PATCH makes the first revision.
      const given = body.source_config ?? {};
      sourceConfig = {
        ...emptySourceConfig(),
        deployment_type: given.deployment_type ?? 'dev',
        install_command: ('install_command' in given ? (given.install_command as string | null | undefined) : null) ?? null,
        build_command: ('build_command' in given ? (given.build_command as string | null | undefined) : null) ?? null,
        resource_spec: given.resource_spec ?? null,
        custom_url: serverUrl(),
      };
      const revisionFields = body.source_revision_config ?? {};
      config = revisionConfig({
        graph_config_path: 'graph_config_path' in revisionFields ? (revisionFields.graph_config_path as string | null) : null,
        image_uri: 'image_uri' in revisionFields ? (revisionFields.image_uri as string | null | undefined) : null,
      });
      if (!config.image_uri) revisionId = null;
    } else if (body.source === 'github') {
      if (body.source_config.repo_url.startsWith('file://') && !this.#deps.allowFileRepoUrls) {
        // Reading local paths on the server's machine is for tests and experiments only.
        throw new ValidationFailed([
          {
            loc: ['body', 'source_config', 'repo_url'],
            msg: 'file:// repository URLs are not accepted by this server (ALLOW_FILE_REPO_URLS)',
            type: 'value_error',
          },
        ]);
      }
      if (
        body.source_config.repo_url.startsWith('http://') &&
        !(this.#deps.githubUrl?.startsWith('http://') && repositoryOnHost(body.source_config.repo_url, this.#deps.githubUrl))
      ) {
        // Plain http would send tokens and code in clear: only an internal GitHub configured as http is read so.
        throw new ValidationFailed([
          {
            loc: ['body', 'source_config', 'repo_url'],
            msg: 'http:// repository URLs are accepted only on GITHUB_URL when it is http://; use https://',
            type: 'value_error',
          },
        ]);
      }
      const integration = await store.getIntegration(tenantId, body.source_config.integration_id);
      if (!integration) throw new BadRequest(`integration_id ${body.source_config.integration_id} is not a GitHub integration of this workspace.`);
      sourceConfig = {
        ...emptySourceConfig(),
        integration_id: body.source_config.integration_id,
        repo_url: body.source_config.repo_url,
        deployment_type: body.source_config.deployment_type ?? 'dev',
        build_on_push: body.source_config.build_on_push ?? false,
        install_command: body.source_config.install_command ?? null,
        build_command: body.source_config.build_command ?? null,
        custom_url: serverUrl(),
        // Only when set: the stored JSON of every other deployment stays as it was.
        ...(body.source_config.preview ? { preview: body.source_config.preview } : {}),
        ...(options.previewOf ? { preview_of: options.previewOf } : {}),
      };
      config = revisionConfig({
        repo_ref: body.source_revision_config.repo_ref,
        graph_config_path: body.source_revision_config.graph_config_path,
        repo_commit_sha: options.commitSha ?? null,
      });
    } else {
      const listener = await store.getListener(tenantId, body.source_config.listener_id);
      if (!listener) throw new BadRequest(`listener_id ${body.source_config.listener_id} is not a listener of this workspace.`);
      const given = body.source_config.listener_config?.k8s_namespace;
      // On a k8s listener a deployment always runs in one of its namespaces: none given means its first.
      const namespace = given || (listener.compute_type === 'k8s' ? listener.compute_config.k8s_namespaces[0] : undefined);
      if (namespace) {
        if (listener.compute_type !== 'k8s') {
          throw new BadRequest(`listener_config.k8s_namespace applies only to k8s listeners; listener ${listener.id} is ${listener.compute_type}.`);
        }
        const allowed = listener.compute_config.k8s_namespaces;
        if (allowed.length > 0 && !allowed.includes(namespace)) {
          throw new BadRequest(`k8s_namespace '${namespace}' is not one of the listener's namespaces (${allowed.join(', ')}).`);
        }
      }
      refuseWhatK8sWouldNot(listener, { spec: body.source_config.resource_spec ?? null, secrets: body.secrets ?? [], previous: null, creating: true });
      sourceConfig = {
        ...emptySourceConfig(),
        listener_id: listener.id,
        listener_config: { k8s_namespace: namespace ?? null },
        resource_spec: body.source_config.resource_spec ?? null,
        custom_url: body.source_config.custom_url ?? null,
      };
      config = revisionConfig({ image_uri: body.source_revision_config.image_uri });
    }
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
      plan = await pipeline.planCreate(tenantId, deployment, {
        status: revision.status!,
        source_revision_config: config,
        resource_spec: revision.resource_spec,
      });
      if (plan.step) revision = { ...revision, status: plan.step.to, logs: plan.step.logs };
    }
    const created = await store.createDeployment({
      deployment,
      revision,
      tracingProject: { id: crypto.randomUUID(), name: body.name, tenant_id: tenantId, deployment_id: id, created_at: now },
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
            id: crypto.randomUUID(),
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

function emptySourceConfig(): SourceConfig {
  return {
    integration_id: null,
    repo_url: null,
    deployment_type: null,
    build_on_push: null,
    custom_url: null,
    resource_spec: null,
    listener_id: null,
    listener_config: null,
    install_command: null,
    build_command: null,
  };
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
  for (const [field, value] of Object.entries(sourceConfig)) {
    if (value === null || value === undefined) continue;
    if (field === 'custom_url' && SERVER_SET_URL.has(source)) {
      throw new BadRequest(`source_config.custom_url is set by the server for ${source} deployments and is read-only.`);
    }
    if (!SOURCE_CONFIG_FIELDS[source].has(field as keyof SourceConfig)) {
      throw new BadRequest(`source_config.${field} is not allowed for a ${source} deployment.`);
    }
  }
  for (const [field, value] of Object.entries(revisionFields)) {
    if (value === null || value === undefined) continue;
    if (!REVISION_CONFIG_FIELDS[source].has(field)) {
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
  // The two client-built sources have nothing to build or run until a tarball or an image is named.
  if (source === 'internal_source' && !nextRevisionConfig.source_tarball_path) {
    throw new BadRequest(
      'This internal_source deployment has no uploaded tarball yet: upload one (POST …/upload-url, then PUT) and send its object_path as source_revision_config.source_tarball_path.',
    );
  }
  if (source === 'internal_docker' && !nextRevisionConfig.image_uri) {
    throw new BadRequest('This internal_docker deployment has no image yet: push one (POST …/push-token) and send it as source_revision_config.image_uri.');
  }
  // A new revision builds its ref afresh: the commit it gets is not known until it is built.
  const newRevisionConfig: SourceRevisionConfig = { ...nextRevisionConfig, repo_commit_sha: null };
  return {
    source_config: nextSourceConfig,
    source_revision_config: newRevisionConfig,
    secrets: nextSecrets,
    revision: {
      id: crypto.randomUUID(),
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
