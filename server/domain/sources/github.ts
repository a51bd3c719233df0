import { repositoryOnHost } from '../../../shared/repo-url.ts';
import { revisionConfig, type SourceConfig, type SourceRevisionConfig } from '../../../shared/schemas/deployment.ts';
import { BadRequest, ValidationFailed } from '../errors.ts';
import { type CreateContext, emptySourceConfig, type SourceModule } from './source-module.ts';

/** `github`: built from a repository of a GitHub integration of the workspace; the server sets its URL. */
export const githubSource: SourceModule<'github'> = {
  async planCreate(body, context) {
    refuseRepoUrl(body.source_config.repo_url, context);
    // With the data plane's choice in the same read (a github deployment is served by the workspace's default listener).
    const found = await context.store.getIntegrationForCreate(context.tenantId, body.source_config.integration_id);
    if (!found) throw new BadRequest(`integration_id ${body.source_config.integration_id} is not a GitHub integration of this workspace.`);
    const given = body.source_config;
    return {
      sourceConfig: {
        ...emptySourceConfig(),
        integration_id: given.integration_id,
        repo_url: given.repo_url,
        deployment_type: given.deployment_type ?? 'dev',
        build_on_push: given.build_on_push ?? false,
        install_command: given.install_command ?? null,
        build_command: given.build_command ?? null,
        custom_url: context.serverUrl(),
        // Only when set: the stored JSON of every other deployment stays as it was.
        ...(given.preview ? { preview: given.preview } : {}),
        ...(context.previewOf ? { preview_of: context.previewOf } : {}),
      },
      revisionConfig: revisionConfig({
        repo_ref: body.source_revision_config.repo_ref,
        graph_config_path: body.source_revision_config.graph_config_path,
        repo_commit_sha: context.commitSha ?? null,
      }),
      firstRevision: true,
      servingComputeType: found.servingComputeType,
    };
  },
  sourceConfigFields: new Set<keyof SourceConfig>([
    'integration_id',
    'repo_url',
    'deployment_type',
    'build_on_push',
    'install_command',
    'build_command',
    'preview',
  ]),
  revisionConfigFields: new Set<keyof SourceRevisionConfig>(['repo_ref', 'graph_config_path']),
  serverSetsUrl: true,
};

/** 422 for a repository URL this server does not read: local paths unless allowed, plain http except on an http GITHUB_URL. */
function refuseRepoUrl(repoUrl: string, context: CreateContext): void {
  // Reading local paths on the server's machine is for tests and experiments only.
  if (repoUrl.startsWith('file://') && !context.allowFileRepoUrls)
    throw repoUrlInvalid('file:// repository URLs are not accepted by this server (ALLOW_FILE_REPO_URLS)');
  // Plain http would send tokens and code in clear: only an internal GitHub configured as http is read so.
  if (repoUrl.startsWith('http://') && !(context.githubUrl?.startsWith('http://') && repositoryOnHost(repoUrl, context.githubUrl)))
    throw repoUrlInvalid('http:// repository URLs are accepted only on GITHUB_URL when it is http://; use https://');
}

function repoUrlInvalid(msg: string): ValidationFailed {
  return new ValidationFailed([{ loc: ['body', 'source_config', 'repo_url'], msg, type: 'value_error' }]);
}
