import type { ApiKey } from '../../shared/schemas/api-key.ts';
import { type Deployment, revisionConfig, type SourceConfig, type SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { GithubMintClaims } from '../../shared/schemas/github-trust.ts';
import type { RevisionStatus } from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { WebhookDeliveryResultKind } from '../../shared/schemas/webhook-delivery.ts';
import type { Workspace } from '../../shared/schemas/workspace.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { currentTraceparent } from '../lib/request-scope.ts';
import type { Row } from './db.ts';
import type { DeploymentRecord, IntegrationRecord, ListenerRecord, NewRevision, RevisionRecord, RevisionWork } from './types.ts';
import type { DeliveryResultLine, DeliveryStatus, StoredDelivery, StoredOutcome } from './webhooks.ts';

export type { Row };

/** How a column is read: its text, or its text or null. */
type ColumnKind = 'text' | 'text?';
type Columns<S extends Record<string, ColumnKind>> = { [K in keyof S]: S[K] extends 'text' ? string : string | null };

/**
 * The columns `spec` names, in its order (a record's keys keep the order of its answer's JSON), as
 * the text they hold; `text?` columns may be null. A record's typed fields are set after it, in place.
 */
export function columns<const S extends Record<string, ColumnKind>>(row: Row, spec: S): Columns<S> {
  const out: Record<string, string | null> = {};
  for (const [name, kind] of Object.entries(spec)) out[name] = kind === 'text' ? (row[name] as string) : ((row[name] as string | null | undefined) ?? null);
  return out as Columns<S>;
}

/*
 * Rows to records, for both backends: the columns have the same names and hold the same text, so
 * one mapping makes both answer byte-identical JSON.
 */

export function toDeployment(row: Row, box: SecretBox): DeploymentRecord {
  return {
    id: row.id as string,
    tenant_id: row.tenant_id as string,
    name: row.name as string,
    source: row.source as Deployment['source'],
    source_config: JSON.parse(row.source_config as string) as SourceConfig,
    source_revision_config: revisionConfig(JSON.parse(row.source_revision_config as string) as Partial<SourceRevisionConfig>),
    secrets: box.decryptJson<Secret[]>(row.secrets as string),
    created_at: row.created_at as string,
    updated_at: row.updated_at as string,
    status: row.status as Deployment['status'],
    latest_revision_id: (row.latest_revision_id as string | null) ?? null,
    active_revision_id: (row.active_revision_id as string | null) ?? null,
    image_version: (row.image_version as string | null) ?? null,
    delete_tracing_project: row.delete_tracing_project === 1,
  };
}

export function toRevision(row: Row): RevisionRecord {
  return {
    // Field by field, not through `columns`: this runs on every GET of a revision, the hottest read.
    id: row.id as string,
    deployment_id: row.deployment_id as string,
    tenant_id: row.tenant_id as string,
    created_at: row.created_at as string,
    updated_at: row.updated_at as string,
    status: row.status as RevisionStatus,
    status_message: (row.status_message as string | null) ?? null,
    source: row.source as RevisionRecord['source'],
    source_revision_config: revisionConfig(JSON.parse(row.source_revision_config as string) as Partial<SourceRevisionConfig>),
    trigger: row.trigger as RevisionRecord['trigger'],
    version: row.version as number,
  };
}

/**
 * A new deployment's first revision as `createDeployment` writes it, as `getRevisionWork` would
 * read it back (both backends: the store conformance suite compares them), so the pipeline hands
 * it on without reading it.
 */
export function createdRevisionWork(deployment: Deployment, revision: NewRevision): RevisionWork {
  return {
    id: revision.id,
    deployment_id: deployment.id,
    tenant_id: deployment.tenant_id,
    created_at: deployment.created_at,
    updated_at: deployment.created_at,
    status: revision.status ?? 'QUEUED',
    status_message: revision.status_message ?? null,
    source: deployment.source,
    source_revision_config: revisionConfig(revision.source_revision_config),
    trigger: revision.trigger,
    version: 1,
    secrets: revision.secrets,
    resource_spec: revision.resource_spec,
    traceparent: revision.traceparent ?? currentTraceparent() ?? null,
  };
}

export function toApiKey(row: Row): ApiKey {
  const key = columns(row, { id: 'text', workspace_id: 'text?', organization_id: 'text', description: 'text?', created_at: 'text' });
  return {
    ...key,
    // Keys minted from a GitHub Actions OIDC token carry their expiry and the claims they were minted for.
    ...(row.expires_at ? { expires_at: row.expires_at as string } : {}),
    ...(row.minted_for ? { github_actions: JSON.parse(row.minted_for as string) as GithubMintClaims } : {}),
  };
}

export function toWorkspace(row: Row): Workspace {
  return columns(row, { id: 'text', name: 'text', organization_id: 'text', created_at: 'text', default_listener_id: 'text?' });
}

export function toListener(row: Row): ListenerRecord {
  return {
    ...columns(row, {
      id: 'text',
      tenant_id: 'text',
      version: 'text?',
      compute_type: 'text',
      compute_id: 'text',
      compute_config: 'text',
      created_at: 'text',
      updated_at: 'text',
      last_seen_at: 'text?',
      agent_version: 'text?',
    }),
    compute_type: row.compute_type as ListenerRecord['compute_type'],
    compute_config: JSON.parse(row.compute_config as string) as ListenerRecord['compute_config'],
    agent_capacity: (row.agent_capacity as number | null | undefined) ?? null,
  };
}

export function toIntegration(row: Row): IntegrationRecord {
  const { id, tenant_id, name, created_at } = columns(row, { id: 'text', tenant_id: 'text', name: 'text', created_at: 'text' });
  return { id, tenant_id, installation_id: row.installation_id as number, name, suspended: row.suspended_at !== null, created_at };
}

export function toTracingProject(row: Row): TracingProject {
  return columns(row, { id: 'text', name: 'text', tenant_id: 'text', deployment_id: 'text?', created_at: 'text' });
}

/** A delivery row with its result lines (the caller reads those for its workspace). */
export function toStoredDelivery(row: Row, lines: Row[]): StoredDelivery {
  const summary = row.summary ? (JSON.parse(row.summary as string) as { outcome: StoredOutcome; reason: string | null }) : null;
  return {
    ...columns(row, { delivery_id: 'text', event: 'text', action: 'text?' }),
    installation_id: (row.installation_id as number | null) ?? null,
    ...columns(row, { repository: 'text?', ref: 'text?', after_sha: 'text?' }),
    status: row.status as DeliveryStatus,
    outcome: summary?.outcome ?? 'pending',
    reason: summary?.reason ?? null,
    ...columns(row, { received_at: 'text', processed_at: 'text?' }),
    results: lines.map(toResultLine),
  };
}

function toResultLine(line: Row): DeliveryResultLine {
  return {
    ...columns(line, {
      tenant_id: 'text',
      deployment_id: 'text?',
      deployment_name: 'text?',
      integration_id: 'text?',
      result: 'text',
      revision_id: 'text?',
      reason: 'text?',
    }),
    result: line.result as WebhookDeliveryResultKind,
  };
}

/**
 * The deployment's sealed secrets for a revision written with it, when the revision carries the
 * very same list (a create, a PATCH): one AES-GCM encryption per write instead of two. The same
 * ciphertext in both rows reveals only that they hold the same secrets, which they visibly do.
 */
export function sealedIfSame(revisionSecrets: Secret[], deploymentSecrets: Secret[], sealed: string): string | undefined {
  return revisionSecrets === deploymentSecrets ? sealed : undefined;
}
