import { revisionConfig, type SourceConfig, type SourceRevisionConfig } from '../../../shared/schemas/deployment.ts';
import type { ListenerRecord } from '../../store/types.ts';
import { BadRequest } from '../errors.ts';
import { refuseWhatK8sWouldNot } from '../k8s-spec-rules.ts';
import { emptySourceConfig, type SourceModule } from './source-module.ts';

/** `external_docker`: an image run by a listener of the workspace (its agent: local or k8s); the client may set its URL. */
export const externalDockerSource: SourceModule<'external_docker'> = {
  async planCreate(body, context) {
    const listener = await context.store.getListener(context.tenantId, body.source_config.listener_id);
    if (!listener) throw new BadRequest(`listener_id ${body.source_config.listener_id} is not a listener of this workspace.`);
    const namespace = namespaceOn(listener, body.source_config.listener_config?.k8s_namespace);
    refuseWhatK8sWouldNot(listener, { spec: body.source_config.resource_spec ?? null, secrets: body.secrets ?? [], previous: null, creating: true });
    return {
      sourceConfig: {
        ...emptySourceConfig(),
        listener_id: listener.id,
        listener_config: { k8s_namespace: namespace ?? null },
        resource_spec: body.source_config.resource_spec ?? null,
        custom_url: body.source_config.custom_url ?? null,
      },
      revisionConfig: revisionConfig({ image_uri: body.source_revision_config.image_uri }),
      firstRevision: true,
      // The deployment's own listener serves it: read already.
      servingComputeType: listener.compute_type,
    };
  },
  sourceConfigFields: new Set<keyof SourceConfig>(['listener_id', 'listener_config', 'resource_spec', 'custom_url']),
  revisionConfigFields: new Set<keyof SourceRevisionConfig>(['image_uri']),
  serverSetsUrl: false,
};

/** The namespace a deployment runs in on its listener: on a k8s listener always one of its own, none given meaning its first. */
function namespaceOn(listener: ListenerRecord, given: string | null | undefined): string | undefined {
  const namespace = given || (listener.compute_type === 'k8s' ? listener.compute_config.k8s_namespaces[0] : undefined);
  if (!namespace) return undefined;
  if (listener.compute_type !== 'k8s')
    throw new BadRequest(`listener_config.k8s_namespace applies only to k8s listeners; listener ${listener.id} is ${listener.compute_type}.`);
  const allowed = listener.compute_config.k8s_namespaces;
  if (allowed.length > 0 && !allowed.includes(namespace))
    throw new BadRequest(`k8s_namespace '${namespace}' is not one of the listener's namespaces (${allowed.join(', ')}).`);
  return namespace;
}
