import type { Deployment, DeploymentCreate, SourceConfig, SourceRevisionConfig } from '../../../shared/schemas/deployment.ts';
import type { ComputeType } from '../../../shared/schemas/listener.ts';
import type { Store } from '../../store/types.ts';

export type SourceName = Deployment['source'];
/** The create body of one source, as the discriminated union narrowed it. */
export type CreateBody<S extends SourceName> = Extract<DeploymentCreate, { source: S }>;

/** A pull-request preview's parent and number, as its stored `source_config` keeps them. */
export type PreviewOf = { parent_deployment_id: string; pull_request: number };
/** `source_config` as stored: a preview also keeps its parent there (no column of its own). */
export type StoredSourceConfig = SourceConfig & { preview_of?: PreviewOf };

/** What planning a create may look up and decide with. */
export type CreateContext = {
  tenantId: string;
  store: Pick<Store, 'getIntegrationForCreate' | 'getListener'>;
  /** A new `https://<name>-<random>.<DEPLOYMENT_DOMAIN>` for the sources whose URL the server sets. */
  serverUrl: () => string;
  allowFileRepoUrls: boolean;
  /** `GITHUB_URL`: the one host whose repositories may be named over http:// (when it is http:// itself). */
  githubUrl?: string;
  /** The deployment is a pull-request preview of that parent, built from `commitSha` (the preview service only). */
  previewOf?: PreviewOf;
  commitSha?: string;
};

/** A create's stored configuration, and whether it has anything to build or run yet (its first revision). */
export type PlannedCreate = {
  sourceConfig: StoredSourceConfig;
  revisionConfig: SourceRevisionConfig;
  firstRevision: boolean;
  /**
   * The compute type of the listener that is to serve the deployment (null: none, the sandbox),
   * when the plan read it with what it read anyway; absent, the pipeline reads it.
   */
  servingComputeType?: ComputeType | null;
};

/** What a PATCH of a source may say, decided against the stored deployment. */
export type PatchRules = {
  /** Fields a PATCH may set in `source_config` (the seed's "Applies to" column). */
  sourceConfigFields: ReadonlySet<string>;
  /** Fields a PATCH may set in `source_revision_config`. */
  revisionConfigFields: ReadonlySet<string>;
  /** Whether the server sets `custom_url` (read-only to clients). */
  serverSetsUrl: boolean;
  /** Refuses a new revision the source has nothing to build or run for yet (400). */
  refuseUnbuildable?(next: SourceRevisionConfig): void;
};

/**
 * One `source`: how a create of it is planned, and what a PATCH of it may say. Each source is a
 * module of its own (`github.ts`, `external-docker.ts`, `internal.ts`), so a rule of one source is
 * never an `if` on the source inside another's.
 */
export type SourceModule<S extends SourceName> = PatchRules & {
  /** Checks a create against stored state (400 for what the body alone could not tell) and plans it. */
  planCreate(body: CreateBody<S>, context: CreateContext): Promise<PlannedCreate>;
};

/** A `source_config` with every field null, for a source to fill in what it takes. */
export function emptySourceConfig(): SourceConfig {
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
