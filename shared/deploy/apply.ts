import type { ApiClient } from '../client.ts';
import type { Deployment, DeploymentCreate, DeploymentPatch, Source } from '../schemas/deployment.ts';
import { type DeployOptions, InputError } from './options.ts';

export type ApplyAction = 'created' | 'patched' | 'unchanged';

export type Applied = {
  deployment: Deployment;
  action: ApplyAction;
  /** The revision this run created: `latest_revision_id` of the create or PATCH answer; null when none. */
  revisionId: string | null;
};

/** Inputs that a deployment of the other source does not take, by the deployment's source. */
const NOT_FOR: Record<Source, Array<[keyof DeployOptions, string]>> = {
  github: [
    ['imageUri', 'image-uri'],
    ['listenerId', 'listener-id'],
    ['k8sNamespace', 'k8s-namespace'],
    ['customUrl', 'custom-url'],
    ['resourceSpec', 'resource-spec'],
  ],
  external_docker: [
    ['repoUrl', 'repo-url'],
    ['integrationId', 'integration-id'],
    ['deploymentType', 'deployment-type'],
    ['repoRef', 'repo-ref'],
    ['graphConfigPath', 'graph-config-path'],
    ['buildOnPush', 'build-on-push'],
  ],
  // The hosted API's sources, found by id or name: an internal_docker one takes a new image here;
  // an internal_source one needs an uploaded tarball, which `langgraph deploy` makes, not this client.
  internal_source: [
    ['imageUri', 'image-uri'],
    ['listenerId', 'listener-id'],
    ['k8sNamespace', 'k8s-namespace'],
    ['customUrl', 'custom-url'],
    ['repoUrl', 'repo-url'],
    ['integrationId', 'integration-id'],
    ['repoRef', 'repo-ref'],
    ['buildOnPush', 'build-on-push'],
  ],
  internal_docker: [
    ['listenerId', 'listener-id'],
    ['k8sNamespace', 'k8s-namespace'],
    ['customUrl', 'custom-url'],
    ['repoUrl', 'repo-url'],
    ['integrationId', 'integration-id'],
    ['repoRef', 'repo-ref'],
    ['graphConfigPath', 'graph-config-path'],
    ['buildOnPush', 'build-on-push'],
  ],
};

/**
 * Creates the deployment, or PATCHes the existing one (found by id, or by exact name), and answers
 * which revision this run created. A PATCH that carries no revision field creates none, and says so.
 */
export async function applyDeployment(
  client: ApiClient,
  options: DeployOptions,
  signal?: AbortSignal,
  info: (message: string) => void = () => {},
): Promise<Applied> {
  const existing =
    options.target.kind === 'id'
      ? await client.getDeployment(options.target.deploymentId, signal)
      : await client.findDeploymentByName(options.target.name, signal);
  if (!existing) {
    const body = await createBody(client, options, signal, info);
    const deployment = await client.createDeployment(body, signal);
    return { deployment, action: 'created', revisionId: deployment.latest_revision_id };
  }

  if (options.source && options.source !== existing.source) {
    throw new InputError(
      `Deployment ${existing.name} has source ${existing.source}, which cannot change, but the inputs (source, or the source-specific inputs given) are for ${options.source}.`,
    );
  }
  for (const [field, input] of NOT_FOR[existing.source]) {
    if (options[field] !== undefined) throw new InputError(`Input ${input} does not apply to deployment ${existing.name}, whose source is ${existing.source}.`);
  }
  const body = patchBody(existing.source, options);
  if (!body) return { deployment: existing, action: 'unchanged', revisionId: null };
  const deployment = await client.patchDeployment(existing.id, body, signal);
  const createsRevision = body.source_revision_config != null || body.secrets != null || body.source_config?.resource_spec != null;
  const revisionId = createsRevision && deployment.latest_revision_id !== existing.latest_revision_id ? deployment.latest_revision_id : null;
  return { deployment, action: 'patched', revisionId };
}

/** The PATCH body from the inputs that were given; null when there is nothing to send. */
export function patchBody(source: Source, options: DeployOptions): DeploymentPatch | null {
  const sourceConfig = compact({
    integration_id: options.integrationId,
    repo_url: options.repoUrl,
    deployment_type: options.deploymentType,
    build_on_push: options.buildOnPush,
    listener_id: options.listenerId,
    listener_config: options.k8sNamespace ? { k8s_namespace: options.k8sNamespace } : undefined,
    custom_url: options.customUrl,
    resource_spec: options.resourceSpec,
  });
  const revisionConfig = compact({
    repo_ref: options.repoRef ?? (source === 'github' ? options.defaultRepoRef : undefined),
    graph_config_path: options.graphConfigPath,
    image_uri: options.imageUri,
  });
  const body: DeploymentPatch = compact({
    source_config: Object.keys(sourceConfig).length ? sourceConfig : undefined,
    source_revision_config: Object.keys(revisionConfig).length ? revisionConfig : undefined,
    secrets: options.secrets,
  });
  return Object.keys(body).length ? body : null;
}

async function createBody(
  client: ApiClient,
  options: DeployOptions,
  signal: AbortSignal | undefined,
  info: (message: string) => void,
): Promise<DeploymentCreate> {
  if (options.target.kind === 'id') throw new Error('unreachable: a deployment given by id exists or the GET failed');
  const name = options.target.name;
  if (options.source === 'github') {
    const integrationId =
      options.integrationId ??
      (await onlyOne(
        'integration-id',
        'GitHub integration',
        (await client.listIntegrations(signal)).map((i) => i.id),
        info,
      ));
    return {
      name,
      source: 'github',
      source_config: compact({
        integration_id: integrationId,
        repo_url: options.repoUrl!,
        deployment_type: options.deploymentType,
        build_on_push: options.buildOnPush,
      }),
      source_revision_config: { repo_ref: (options.repoRef ?? options.defaultRepoRef)!, graph_config_path: options.graphConfigPath! },
      secrets: options.secrets ?? [],
    };
  }
  const listenerId =
    options.listenerId ??
    (await onlyOne(
      'listener-id',
      'listener',
      (await client.listListeners(signal)).map((l) => l.id),
      info,
    ));
  return {
    name,
    source: 'external_docker',
    source_config: compact({
      listener_id: listenerId,
      listener_config: options.k8sNamespace ? { k8s_namespace: options.k8sNamespace } : undefined,
      resource_spec: options.resourceSpec,
      custom_url: options.customUrl,
    }),
    source_revision_config: { image_uri: options.imageUri! },
    secrets: options.secrets ?? [],
  };
}

/**
 * The workspace's only integration or listener, when the input was left out. With none or several,
 * guessing could deploy to the wrong place, so the input is required.
 */
async function onlyOne(input: string, what: string, ids: string[], info: (message: string) => void): Promise<string> {
  if (ids.length === 1) {
    info(`Input ${input} not given: using the workspace's only ${what}, ${ids[0]}.`);
    return ids[0]!;
  }
  if (ids.length === 0) throw new InputError(`Input ${input} is required: the workspace has no ${what}.`);
  throw new InputError(`Input ${input} is required: the workspace has ${ids.length} of them (${ids.join(', ')}); say which one.`);
}

/** The object without its undefined fields (so a PATCH sends only what the user gave). */
function compact<T extends Record<string, unknown>>(object: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as never;
}
