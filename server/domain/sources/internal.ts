import { revisionConfig, type SourceConfig, type SourceRevisionConfig } from '../../../shared/schemas/deployment.ts';
import { BadRequest } from '../errors.ts';
import { type CreateBody, type CreateContext, emptySourceConfig, type PlannedCreate, type SourceModule } from './source-module.ts';

/**
 * The two client-built sources, `internal_source` (a tarball the client uploads) and
 * `internal_docker` (an image the client pushes). Created empty: `langgraph deploy` uploads or
 * pushes next, and its PATCH makes the first revision. The server sets their URL.
 */
function createdEmpty(
  body: CreateBody<'internal_source' | 'internal_docker'>,
  context: CreateContext,
  commands: { install_command: string | null; build_command: string | null },
  revision: { graph_config_path: string | null; image_uri: string | null },
): PlannedCreate {
  const given = body.source_config ?? {};
  const config = revisionConfig(revision);
  return {
    sourceConfig: {
      ...emptySourceConfig(),
      deployment_type: given.deployment_type ?? 'dev',
      ...commands,
      resource_spec: given.resource_spec ?? null,
      custom_url: context.serverUrl(),
    },
    revisionConfig: config,
    // A pushed image named on create is something to run at once.
    firstRevision: config.image_uri !== null,
  };
}

export const internalSourceSource: SourceModule<'internal_source'> = {
  async planCreate(body, context) {
    return createdEmpty(
      body,
      context,
      { install_command: body.source_config?.install_command ?? null, build_command: body.source_config?.build_command ?? null },
      { graph_config_path: body.source_revision_config?.graph_config_path ?? null, image_uri: null },
    );
  },
  sourceConfigFields: new Set<keyof SourceConfig>(['deployment_type', 'install_command', 'build_command', 'resource_spec']),
  revisionConfigFields: new Set<keyof SourceRevisionConfig>(['graph_config_path', 'source_tarball_path']),
  serverSetsUrl: true,
  refuseUnbuildable(next) {
    if (!next.source_tarball_path)
      throw new BadRequest(
        'This internal_source deployment has no uploaded tarball yet: upload one (POST …/upload-url, then PUT) and send its object_path as source_revision_config.source_tarball_path.',
      );
  },
};

export const internalDockerSource: SourceModule<'internal_docker'> = {
  async planCreate(body, context) {
    return createdEmpty(
      body,
      context,
      { install_command: null, build_command: null },
      { graph_config_path: null, image_uri: body.source_revision_config?.image_uri ?? null },
    );
  },
  sourceConfigFields: new Set<keyof SourceConfig>(['deployment_type', 'resource_spec']),
  revisionConfigFields: new Set<keyof SourceRevisionConfig>(['image_uri']),
  serverSetsUrl: true,
  refuseUnbuildable(next) {
    if (!next.image_uri)
      throw new BadRequest('This internal_docker deployment has no image yet: push one (POST …/push-token) and send it as source_revision_config.image_uri.');
  },
};
