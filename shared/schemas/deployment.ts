import { z } from 'zod';
import { ResourceName, Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';
import { ResourceSpec } from './resource-spec.ts';
import { Secret, SecretList } from './secret.ts';

/**
 * `github` and `external_docker` (the seed's), `internal_source` (a tarball uploaded through
 * `POST …/upload-url`, built like `github`) and `internal_docker` (an image the client pushed with
 * `POST …/push-token`, deployed like `external_docker`), as the hosted API and `langgraph deploy` use them.
 */
export const Source = lazySchema(() => z.enum(['github', 'external_docker', 'internal_source', 'internal_docker']));
export type Source = z.infer<typeof Source>;

export const DeploymentType = lazySchema(() => z.enum(['dev_free', 'dev', 'prod']));
export type DeploymentType = z.infer<typeof DeploymentType>;

export const DeploymentStatus = lazySchema(() => z.enum(['AWAITING_DATABASE', 'READY', 'UNUSED', 'AWAITING_DELETE', 'UNKNOWN']));
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;

/**
 * https://host/owner/repo(.git), ssh://[git@]host/…, git@host:owner/repo(.git), or file:///path (a
 * local repository; the server accepts it only with ALLOW_FILE_REPO_URLS). http:// only on the
 * GitHub App's own host when GITHUB_URL is http:// (the server decides). No credentials: a URL
 * with a user and password or token would be stored, shown and logged as it is.
 */
export const RepoUrl = lazySchema(() =>
  z
    .string()
    .max(2048)
    .regex(/^(https?:\/\/[^\s/@]+\/\S+|ssh:\/\/(git@)?[^\s/@:]+(:\d+)?\/\S+|git@[^\s:@/]+:\S+|file:\/\/\/\S+)$/, {
      message: 'repo_url must be a git URL without credentials: https://host/owner/repo, git@host:owner/repo, ssh://git@host/owner/repo or file:///path',
    }),
);

/** A branch name, or a tag as `refs/tags/<tag>`; checked against git's ref-name rules that matter here. */
export const RepoRef = lazySchema(() =>
  z
    .string()
    .min(1)
    .max(255)
    .refine((ref) => !/[\s~^:?*[\\]|\.\.|^[-/]|\/$|\.lock$|@\{/.test(ref), {
      message: 'repo_ref must be a branch name or refs/tags/<tag>',
    }),
);

const TAG_PREFIX = 'refs/tags/';
/** A `repo_ref` naming a tag rather than a branch. */
export function isTagRef(ref: string | null | undefined): boolean {
  return typeof ref === 'string' && ref.startsWith(TAG_PREFIX);
}

const GraphConfigPath = lazySchema(() => z.string().min(1).max(1024));
/** What `POST …/upload-url` answered as `object_path`; checked against the uploads of the deployment. */
const SourceTarballPath = lazySchema(() => z.string().min(1).max(1024));
const ImageUri = lazySchema(() => z.string().min(1).max(1024).regex(/^\S+$/, { message: 'image_uri must not contain white space' }));
const Command = lazySchema(() => z.string().max(4096));
const CustomUrl = lazySchema(() => z.url({ protocol: /^https?$/, message: 'custom_url must be an http(s) URL' }));

export const ListenerConfig = lazySchema(() =>
  z.strictObject({
    k8s_namespace: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: 'k8s_namespace must be a DNS label' })
      .max(63)
      .nullish(),
  }),
);
export type ListenerConfig = z.infer<typeof ListenerConfig>;

/** A field this source does not take: accepted only as null or absent. */
function notAllowed(field: string, source: Source, why = `is not allowed when source is ${source}`) {
  return z
    .unknown()
    .refine((value) => value === null || value === undefined, { message: `${field} ${why}` })
    .optional()
    .meta({ description: `${field} ${why}` });
}

/**
 * Pull-request previews of a `github` deployment (contract §12): a child deployment per pull
 * request of a branch of the same repository, for every pull request or only those with `label`.
 */
let previewSettingsFields: ReturnType<typeof buildPreviewSettingsFields> | undefined;
/** One set of field schemas for `PreviewSettings` and `SourceConfig.preview`, built on first use like the schemas. */
const PreviewSettingsFields = () => (previewSettingsFields ??= buildPreviewSettingsFields());
const buildPreviewSettingsFields = () => ({
  trigger: z.enum(['pull_request', 'label']),
  label: z.string().min(1).max(50).nullish(),
  /** A preview with no pull-request activity for this long is torn down. */
  idle_ttl_hours: z.number().positive().max(8760).nullish(),
  /** Previews of this deployment at once; past it, a new one is refused with a status on the pull request. */
  max_concurrent: z.int().min(1).max(1000).nullish(),
});
export const PreviewSettings = lazySchema(() =>
  z.strictObject(PreviewSettingsFields()).refine((value) => value.trigger !== 'label' || Boolean(value.label), {
    message: 'label is required when trigger is label',
    path: ['label'],
  }),
);
export type PreviewSettings = z.infer<typeof PreviewSettings>;

// ---------------------------------------------------------------- create (a union by `source`)

const GithubSourceConfigCreate = lazySchema(() =>
  z.strictObject({
    integration_id: Uuid,
    repo_url: RepoUrl,
    deployment_type: DeploymentType.nullish(),
    build_on_push: z.boolean().nullish(),
    install_command: Command.nullish(),
    build_command: Command.nullish(),
    preview: PreviewSettings.nullish(),
    custom_url: notAllowed('custom_url', 'github', 'is set by the server for github deployments and is read-only'),
    resource_spec: notAllowed('resource_spec', 'github'),
    listener_id: notAllowed('listener_id', 'github'),
    listener_config: notAllowed('listener_config', 'github'),
  }),
);

const ExternalDockerSourceConfigCreate = lazySchema(() =>
  z.strictObject({
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
  }),
);

type ConfigPathFields = { graph_config_path?: string | null | undefined; langgraph_config_path?: string | null | undefined };

/**
 * `graph_config_path` (the seed's name) and `langgraph_config_path` (the hosted API's) are one
 * field: either may be sent; both with different values is 422.
 */
function configPathRule(required: boolean) {
  return (value: ConfigPathFields, ctx: z.RefinementCtx) => {
    const { graph_config_path: seed, langgraph_config_path: hosted } = value;
    if (seed != null && hosted != null && seed !== hosted) {
      ctx.addIssue({
        code: 'custom',
        path: ['langgraph_config_path'],
        message: 'graph_config_path and langgraph_config_path are one field; they were given different values',
      });
    }
    if (required && seed == null && hosted == null) {
      ctx.addIssue({
        code: 'custom',
        path: ['graph_config_path'],
        message: 'Field required (graph_config_path or langgraph_config_path)',
        params: { type: 'missing' },
      });
    }
  };
}

/** Folds `langgraph_config_path` into `graph_config_path`, the name the server keeps. */
function mergeConfigPath<T extends ConfigPathFields>({
  langgraph_config_path,
  ...rest
}: T): Omit<T, 'langgraph_config_path'> & { graph_config_path: string | null } {
  return { ...rest, graph_config_path: rest.graph_config_path ?? langgraph_config_path ?? null };
}

const GithubRevisionConfigCreate = lazySchema(() =>
  z
    .strictObject({
      repo_ref: RepoRef,
      graph_config_path: GraphConfigPath.nullish(),
      langgraph_config_path: GraphConfigPath.nullish(),
      image_uri: notAllowed('image_uri', 'github'),
      source_tarball_path: notAllowed('source_tarball_path', 'github'),
    })
    .superRefine(configPathRule(true))
    .transform(mergeConfigPath),
);

const ExternalDockerRevisionConfigCreate = lazySchema(() =>
  z.strictObject({
    image_uri: ImageUri,
    repo_ref: notAllowed('repo_ref', 'external_docker'),
    graph_config_path: notAllowed('graph_config_path', 'external_docker'),
    langgraph_config_path: notAllowed('langgraph_config_path', 'external_docker'),
    source_tarball_path: notAllowed('source_tarball_path', 'external_docker'),
  }),
);

const InternalSourceRevisionConfigCreate = lazySchema(() =>
  z
    .strictObject({
      graph_config_path: GraphConfigPath.nullish(),
      langgraph_config_path: GraphConfigPath.nullish(),
      repo_ref: notAllowed('repo_ref', 'internal_source'),
      image_uri: notAllowed('image_uri', 'internal_source'),
      source_tarball_path: notAllowed(
        'source_tarball_path',
        'internal_source',
        'cannot be given on create: upload the tarball with POST /v2/deployments/{id}/upload-url, then PATCH source_tarball_path',
      ),
    })
    .superRefine(configPathRule(false))
    .transform(mergeConfigPath),
);

const InternalDockerRevisionConfigCreate = lazySchema(() =>
  z.strictObject({
    image_uri: ImageUri.nullish(),
    repo_ref: notAllowed('repo_ref', 'internal_docker'),
    graph_config_path: notAllowed('graph_config_path', 'internal_docker'),
    langgraph_config_path: notAllowed('langgraph_config_path', 'internal_docker'),
    source_tarball_path: notAllowed('source_tarball_path', 'internal_docker'),
  }),
);

/** `internal_source` / `internal_docker`: built or pushed by the client; the server sets `custom_url`. */
function internalSourceConfigCreate(source: 'internal_source' | 'internal_docker') {
  const builds = source === 'internal_source';
  return z.strictObject({
    deployment_type: DeploymentType.nullish(),
    resource_spec: ResourceSpec.nullish(),
    install_command: builds ? Command.nullish() : notAllowed('install_command', source),
    build_command: builds ? Command.nullish() : notAllowed('build_command', source),
    custom_url: notAllowed('custom_url', source, `is set by the server for ${source} deployments and is read-only`),
    integration_id: notAllowed('integration_id', source),
    repo_url: notAllowed('repo_url', source),
    build_on_push: notAllowed('build_on_push', source),
    listener_id: notAllowed('listener_id', source),
    listener_config: notAllowed('listener_config', source),
  });
}

const GithubDeploymentCreate = lazySchema(() =>
  z
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
    }),
);

const ExternalDockerDeploymentCreate = lazySchema(() =>
  z.strictObject({
    name: ResourceName,
    source: z.literal('external_docker'),
    source_config: ExternalDockerSourceConfigCreate,
    source_revision_config: ExternalDockerRevisionConfigCreate,
    secrets: SecretList.nullish(),
    image_version: z.string().max(255).nullish(),
  }),
);

const InternalSourceDeploymentCreate = lazySchema(() =>
  z.strictObject({
    name: ResourceName,
    source: z.literal('internal_source'),
    source_config: internalSourceConfigCreate('internal_source').nullish(),
    source_revision_config: InternalSourceRevisionConfigCreate.nullish(),
    secrets: SecretList.nullish(),
    image_version: z.string().max(255).nullish(),
  }),
);

const InternalDockerDeploymentCreate = lazySchema(() =>
  z.strictObject({
    name: ResourceName,
    source: z.literal('internal_docker'),
    source_config: internalSourceConfigCreate('internal_docker').nullish(),
    source_revision_config: InternalDockerRevisionConfigCreate.nullish(),
    secrets: SecretList.nullish(),
    image_version: z.string().max(255).nullish(),
  }),
);

/** `POST /v2/deployments`. */
export const DeploymentCreate = lazySchema(() =>
  z.discriminatedUnion('source', [GithubDeploymentCreate, ExternalDockerDeploymentCreate, InternalSourceDeploymentCreate, InternalDockerDeploymentCreate]),
);
export type DeploymentCreate = z.infer<typeof DeploymentCreate>;

// ---------------------------------------------------------------- patch (checked against the stored source by the domain)

export const SourceConfigPatch = lazySchema(() =>
  z.strictObject({
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
    preview: PreviewSettings.nullish(),
  }),
);
export type SourceConfigPatch = z.infer<typeof SourceConfigPatch>;

export const SourceRevisionConfigPatch = lazySchema(() =>
  z
    .strictObject({
      repo_ref: RepoRef.nullish(),
      graph_config_path: GraphConfigPath.nullish(),
      langgraph_config_path: GraphConfigPath.nullish(),
      image_uri: ImageUri.nullish(),
      source_tarball_path: SourceTarballPath.nullish(),
    })
    .superRefine(configPathRule(false))
    .transform(mergeConfigPath),
);
export type SourceRevisionConfigPatch = z.infer<typeof SourceRevisionConfigPatch>;

/**
 * `PATCH /v2/deployments/{id}`: optional, nullable fields. `revision_source` is what `langgraph
 * deploy` sends to say which source the new revision is from; it must match the deployment's.
 * Unknown fields (`tracked_packages`, `secret_references`, …) are ignored with a `Warning`.
 */
export const DeploymentPatch = lazySchema(() =>
  z
    .strictObject({
      revision_source: Source.nullish(),
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
    }),
);
export type DeploymentPatch = z.infer<typeof DeploymentPatch>;
export type DeploymentPatchInput = z.input<typeof DeploymentPatch>;

/**
 * `POST /v2/deployments/{id}/revisions`: always creates a revision, from the PATCH's revision
 * fields; an empty body rebuilds the latest revision's config.
 */
export const RevisionCreate = lazySchema(() =>
  z.strictObject({
    revision_source: Source.nullish(),
    source_config: z.strictObject({ resource_spec: ResourceSpec.nullish() }).nullish(),
    source_revision_config: SourceRevisionConfigPatch.nullish(),
    secrets: SecretList.nullish(),
  }),
);
export type RevisionCreate = z.infer<typeof RevisionCreate>;

/** `DELETE /v2/deployments?deployment_ids=a&deployment_ids=b` (or comma-separated). */
export const BulkDeleteQuery = lazySchema(() =>
  z.object({
    deployment_ids: z.array(Uuid).min(1).max(100),
    delete_tracing_project: z
      .enum(['true', 'false'])
      .default('false')
      .transform((value) => value === 'true'),
  }),
);
export type BulkDeleteQuery = z.infer<typeof BulkDeleteQuery>;

/** The bulk delete's answer: 200 when every id was deleted, 207 when some were not. */
export const BulkDeleteResult = lazySchema(() =>
  z.object({
    deleted: z.array(Uuid),
    failed: z.array(z.object({ id: z.string(), detail: z.string() })),
  }),
);
export type BulkDeleteResult = z.infer<typeof BulkDeleteResult>;

/** `POST …/upload-url`: where to `PUT` the gzip tarball, and what to PATCH as `source_tarball_path`. */
export const UploadUrl = lazySchema(() => z.object({ upload_url: z.url(), object_path: z.string() }));
export type UploadUrl = z.infer<typeof UploadUrl>;

/** `POST …/push-token`: a token for `docker login` to the configured registry. */
export const PushToken = lazySchema(() => z.object({ token: z.string(), registry_url: z.string() }));
export type PushToken = z.infer<typeof PushToken>;

// ---------------------------------------------------------------- responses

export const SourceConfig = lazySchema(() =>
  z.object({
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
    /** `github` deployments with pull-request previews only (absent otherwise). */
    preview: z.object(PreviewSettingsFields()).nullish(),
  }),
);
export type SourceConfig = z.infer<typeof SourceConfig>;

/**
 * A revision's config as answers show it. `langgraph_config_path` always equals
 * `graph_config_path`. The two later fields default to null so that a client of this version
 * still reads answers of a server that predates them.
 */
export const SourceRevisionConfig = lazySchema(() =>
  z.object({
    repo_ref: z.string().nullable(),
    graph_config_path: z.string().nullable(),
    langgraph_config_path: z.string().nullable().default(null),
    image_uri: z.string().nullable(),
    source_tarball_path: z.string().nullable().default(null),
    repo_commit_sha: z.string().nullable(),
  }),
);
export type SourceRevisionConfig = z.infer<typeof SourceRevisionConfig>;

/** A complete revision config from the fields that matter; the alias always mirrors `graph_config_path`. */
export function revisionConfig(fields: Partial<SourceRevisionConfig>): SourceRevisionConfig {
  const graph = fields.graph_config_path ?? null;
  return {
    repo_ref: fields.repo_ref ?? null,
    graph_config_path: graph,
    langgraph_config_path: graph,
    image_uri: fields.image_uri ?? null,
    source_tarball_path: fields.source_tarball_path ?? null,
    repo_commit_sha: fields.repo_commit_sha ?? null,
  };
}

export const Deployment = lazySchema(() =>
  z.object({
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
    /** A pull-request preview: the deployment it previews, and the pull request's number (absent otherwise). */
    parent_deployment_id: Uuid.nullish(),
    pull_request: z.int().nullish(),
  }),
);
export type Deployment = z.infer<typeof Deployment>;

export const DeploymentListQuery = lazySchema(() =>
  z.object({
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
  }),
);
export type DeploymentListQuery = z.infer<typeof DeploymentListQuery>;

export const DeploymentDeleteQuery = lazySchema(() =>
  z.object({
    delete_tracing_project: z
      .enum(['true', 'false'])
      .default('false')
      .transform((value) => value === 'true'),
    /** On a deployment already being deleted: remove it without waiting for its listener's agent (docs/listener-protocol.md). */
    force: z
      .enum(['true', 'false'])
      .default('false')
      .transform((value) => value === 'true'),
  }),
);
