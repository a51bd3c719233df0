import type { ApiKey } from '../../shared/schemas/api-key.ts';
import type { GithubMintClaims } from '../../shared/schemas/github-trust.ts';
import { revisionConfig, type Deployment, type SourceConfig, type SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { RevisionStatus } from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { Workspace } from '../../shared/schemas/workspace.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { DeploymentRecord, IntegrationRecord, ListenerRecord, NewRevision, RevisionRecord, RevisionWork } from './types.ts';
import type { WebhookDeliveryResultKind } from '../../shared/schemas/webhook-delivery.ts';
import type { DeliveryResultLine, DeliveryStatus, StoredDelivery, StoredOutcome } from './webhooks.ts';

/** A row as either driver returns it: column name → value. */
export type Row = Record<string, unknown>;

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
  };
}

export function toApiKey(row: Row): ApiKey {
  return {
    id: row.id as string,
    workspace_id: (row.workspace_id as string | null) ?? null,
    organization_id: row.organization_id as string,
    description: (row.description as string | null) ?? null,
    created_at: row.created_at as string,
    // Keys minted from a GitHub Actions OIDC token carry their expiry and the claims they were minted for.
    ...(row.expires_at ? { expires_at: row.expires_at as string } : {}),
    ...(row.minted_for ? { github_actions: JSON.parse(row.minted_for as string) as GithubMintClaims } : {}),
  };
}

export function toWorkspace(row: Row): Workspace {
  return {
    id: row.id as string,
    name: row.name as string,
    organization_id: row.organization_id as string,
    created_at: row.created_at as string,
    default_listener_id: (row.default_listener_id as string | null | undefined) ?? null,
  };
}

export function toListener(row: Row): ListenerRecord {
  return {
    id: row.id as string,
    tenant_id: row.tenant_id as string,
    version: (row.version as string | null | undefined) ?? null,
    compute_type: row.compute_type as ListenerRecord['compute_type'],
    compute_id: row.compute_id as string,
    compute_config: JSON.parse(row.compute_config as string) as ListenerRecord['compute_config'],
    created_at: row.created_at as string,
    updated_at: row.updated_at as string,
    last_seen_at: (row.last_seen_at as string | null | undefined) ?? null,
    agent_version: (row.agent_version as string | null | undefined) ?? null,
    agent_capacity: (row.agent_capacity as number | null | undefined) ?? null,
  };
}

export function toIntegration(row: Row): IntegrationRecord {
  return {
    id: row.id as string,
    tenant_id: row.tenant_id as string,
    installation_id: row.installation_id as number,
    name: row.name as string,
    suspended: row.suspended_at !== null,
    created_at: row.created_at as string,
  };
}

export function toTracingProject(row: Row): TracingProject {
  return {
    id: row.id as string,
    name: row.name as string,
    tenant_id: row.tenant_id as string,
    deployment_id: (row.deployment_id as string | null) ?? null,
    created_at: row.created_at as string,
  };
}

/** A delivery row with its result lines (the caller reads those for its workspace). */
export function toStoredDelivery(row: Row, lines: Row[]): StoredDelivery {
  const summary = row.summary ? (JSON.parse(row.summary as string) as { outcome: StoredOutcome; reason: string | null }) : null;
  return {
    delivery_id: row.delivery_id as string,
    event: row.event as string,
    action: (row.action as string | null) ?? null,
    installation_id: (row.installation_id as number | null) ?? null,
    repository: (row.repository as string | null) ?? null,
    ref: (row.ref as string | null) ?? null,
    after_sha: (row.after_sha as string | null) ?? null,
    status: row.status as DeliveryStatus,
    outcome: summary?.outcome ?? 'pending',
    reason: summary?.reason ?? null,
    received_at: row.received_at as string,
    processed_at: (row.processed_at as string | null) ?? null,
    results: lines.map(toResultLine),
  };
}

function toResultLine(line: Row): DeliveryResultLine {
  return {
    tenant_id: line.tenant_id as string,
    deployment_id: (line.deployment_id as string | null) ?? null,
    deployment_name: (line.deployment_name as string | null) ?? null,
    integration_id: (line.integration_id as string | null) ?? null,
    result: line.result as WebhookDeliveryResultKind,
    revision_id: (line.revision_id as string | null) ?? null,
    reason: (line.reason as string | null) ?? null,
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
