import { z } from 'zod';
import { ResourceName, Timestamp, Uuid } from './common.ts';
import { ResourceSpec } from './resource-spec.ts';
import { Secret, SecretList } from './secret.ts';

export const Source = z.enum(['github', 'external_docker']);
export type Source = z.infer<typeof Source>;

export const DeploymentType = z.enum(['dev_free', 'dev', 'prod']);
export type DeploymentType = z.infer<typeof DeploymentType>;

export const DeploymentStatus = z.enum(['AWAITING_DATABASE', 'READY', 'UNUSED', 'AWAITING_DELETE', 'UNKNOWN']);
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;

/**
 * https://host/owner/repo(.git), ssh://[git@]host/…, git@host:owner/repo(.git), or file:///path (a
 * local repository; the server accepts it only with ALLOW_FILE_REPO_URLS). No credentials: a URL
 * with a user and password or token would be stored, shown and logged as it is.
 */
export const RepoUrl = z
  .string()
  .max(2048)
  .regex(/^(https:\/\/[^\s/@]+\/\S+|ssh:\/\/(git@)?[^\s/@:]+(:\d+)?\/\S+|git@[^\s:@/]+:\S+|file:\/\/\/\S+)$/, {
    message: 'repo_url must be a git URL without credentials: https://host/owner/repo, git@host:owner/repo, ssh://git@host/owner/repo or file:///path',
  });

/** A branch name, or a tag as `refs/tags/<tag>`; checked against git's ref-name rules that matter here. */
export const RepoRef = z
  .string()
  .min(1)
  .max(255)
  .refine((ref) => !/[\s~^:?*[\\]|\.\.|^[-/]|\/$|\.lock$|@\{/.test(ref), {
    message: 'repo_ref must be a branch name or refs/tags/<tag>',
  });

const TAG_PREFIX = 'refs/tags/';
/** A `repo_ref` naming a tag rather than a branch. */
export function isTagRef(ref: string | null | undefined): boolean {
  return typeof ref === 'string' && ref.startsWith(TAG_PREFIX);
}

const GraphConfigPath = z.string().min(1).max(1024);
const ImageUri = z
  .string()
  .min(1)
  .max(1024)
  .regex(/^\S+$/, { message: 'image_uri must not contain white space' });
const Command = z.string().max(4096);
const CustomUrl = z.url({ protocol: /^https?$/, message: 'custom_url must be an http(s) URL' });

export const ListenerConfig = z.strictObject({
  k8s_namespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: 'k8s_namespace must be a DNS label' })
    .max(63)
    .nullish(),
});
export type ListenerConfig = z.infer<typeof ListenerConfig>;

/** A field this source does not take: accepted only as null or absent. */
function notAllowed(field: string, source: Source, why = `is not allowed when source is ${source}`) {
  return z
    .unknown()
    .refine((value) => value === null || value === undefined, { message: `${field} ${why}` })
    .optional()
    .meta({ description: `${field} ${why}` });
}

// ---------------------------------------------------------------- create (a union by `source`)

const GithubSourceConfigCreate = z.strictObject({
  integration_id: Uuid,
  repo_url: RepoUrl,
  deployment_type: DeploymentType.nullish(),
  build_on_push: z.boolean().nullish(),
  install_command: Command.nullish(),
  build_command: Command.nullish(),
  custom_url: notAllowed('custom_url', 'github', 'is set by the server for github deployments and is read-only'),
  resource_spec: notAllowed('resource_spec', 'github'),
  listener_id: notAllowed('listener_id', 'github'),
  listener_config: notAllowed('listener_config', 'github'),
});

const ExternalDockerSourceConfigCreate = z.strictObject({
  listener_id: Uuid,
  listener_config: ListenerConfig.nullish(),
  resource_spec: ResourceSpec.nullish(),
  custom_url: CustomUrl.nullish(),
  integration_id: notAllowed('integration_id', 'external_docker'),
  repo_url: notAllowed('repo_url', 'external_docker'),
  deployment_type: notAllowed('deployment_type', 'external_docker'),
  build_on_push: notAllowed('build_on_push', 'external_docker'),
  install_command: notAllowed('install_command', 'external_docker'),
  build_command: notAllowed('build_command', 'external_docker'),
});

const GithubRevisionConfigCreate = z.strictObject({
  repo_ref: RepoRef,
  graph_config_path: GraphConfigPath,
  image_uri: notAllowed('image_uri', 'github'),
});

const ExternalDockerRevisionConfigCreate = z.strictObject({
  image_uri: ImageUri,
  repo_ref: notAllowed('repo_ref', 'external_docker'),
  graph_config_path: notAllowed('graph_config_path', 'external_docker'),
});

const GithubDeploymentCreate = z
  .strictObject({
    name: ResourceName,
    source: z.literal('github'),
    source_config: GithubSourceConfigCreate,
    source_revision_config: GithubRevisionConfigCreate,
    secrets: SecretList.nullish(),
    image_version: z.string().max(255).nullish(),
  })
  .superRefine((body, ctx) => {
    if (body.source_config.build_on_push === true && isTagRef(body.source_revision_config.repo_ref)) {
      ctx.addIssue({
        code: 'custom',
        path: ['source_config', 'build_on_push'],
        message: 'build_on_push cannot be true when repo_ref is a tag (refs/tags/...)',
      });
    }
  });

const ExternalDockerDeploymentCreate = z.strictObject({
  name: ResourceName,
  source: z.literal('external_docker'),
  source_config: ExternalDockerSourceConfigCreate,
  source_revision_config: ExternalDockerRevisionConfigCreate,
  secrets: SecretList.nullish(),
  image_version: z.string().max(255).nullish(),
});

/** `POST /v2/deployments`. */
export const DeploymentCreate = z.discriminatedUnion('source', [GithubDeploymentCreate, ExternalDockerDeploymentCreate]);
export type DeploymentCreate = z.infer<typeof DeploymentCreate>;

// ---------------------------------------------------------------- patch (checked against the stored source by the domain)

export const SourceConfigPatch = z.strictObject({
  integration_id: Uuid.nullish(),
  repo_url: RepoUrl.nullish(),
  deployment_type: DeploymentType.nullish(),
  build_on_push: z.boolean().nullish(),
  custom_url: CustomUrl.nullish(),
  resource_spec: ResourceSpec.nullish(),
  listener_id: Uuid.nullish(),
  listener_config: ListenerConfig.nullish(),
  install_command: Command.nullish(),
  build_command: Command.nullish(),
});
export type SourceConfigPatch = z.infer<typeof SourceConfigPatch>;

export const SourceRevisionConfigPatch = z.strictObject({
  repo_ref: RepoRef.nullish(),
  graph_config_path: GraphConfigPath.nullish(),
  image_uri: ImageUri.nullish(),
});
export type SourceRevisionConfigPatch = z.infer<typeof SourceRevisionConfigPatch>;

/** `PATCH /v2/deployments/{id}`: three optional, nullable fields; anything else is 422. */
export const DeploymentPatch = z
  .strictObject({
    source_config: SourceConfigPatch.nullish(),
    source_revision_config: SourceRevisionConfigPatch.nullish(),
    secrets: SecretList.nullish(),
  })
  .superRefine((body, ctx) => {
    if (body.source_config?.build_on_push === true && isTagRef(body.source_revision_config?.repo_ref)) {
      ctx.addIssue({
        code: 'custom',
        path: ['source_config', 'build_on_push'],
        message: 'build_on_push cannot be true when repo_ref is a tag (refs/tags/...)',
      });
    }
  });
export type DeploymentPatch = z.infer<typeof DeploymentPatch>;

// ---------------------------------------------------------------- responses

export const SourceConfig = z.object({
  integration_id: Uuid.nullable(),
  repo_url: z.string().nullable(),
  deployment_type: DeploymentType.nullable(),
  build_on_push: z.boolean().nullable(),
  custom_url: z.string().nullable(),
  resource_spec: ResourceSpec.nullable(),
  listener_id: Uuid.nullable(),
  listener_config: ListenerConfig.nullable(),
  install_command: z.string().nullable(),
  build_command: z.string().nullable(),
});
export type SourceConfig = z.infer<typeof SourceConfig>;

export const SourceRevisionConfig = z.object({
  repo_ref: z.string().nullable(),
  graph_config_path: z.string().nullable(),
  image_uri: z.string().nullable(),
  repo_commit_sha: z.string().nullable(),
});
export type SourceRevisionConfig = z.infer<typeof SourceRevisionConfig>;

export const Deployment = z.object({
  id: Uuid,
  tenant_id: Uuid,
  name: z.string(),
  source: Source,
  source_config: SourceConfig,
  source_revision_config: SourceRevisionConfig,
  secrets: z.array(Secret),
  created_at: Timestamp,
  updated_at: Timestamp,
  status: DeploymentStatus,
  latest_revision_id: Uuid.nullable(),
  active_revision_id: Uuid.nullable(),
  image_version: z.string().nullable(),
});
export type Deployment = z.infer<typeof Deployment>;

export const DeploymentListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  name_contains: z.string().max(255).optional(),
  status: DeploymentStatus.optional(),
  deployment_type: DeploymentType.optional(),
  image_version: z.string().max(255).optional(),
  deployment_ids: z
    .string()
    .transform((value) => value.split(',').filter((id) => id.length > 0))
    .pipe(z.array(Uuid).max(100))
    .optional(),
});
export type DeploymentListQuery = z.infer<typeof DeploymentListQuery>;

export const DeploymentDeleteQuery = z.object({
  delete_tracing_project: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true'),
});
