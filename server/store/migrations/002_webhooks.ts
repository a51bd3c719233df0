import type { SchemaDialect } from '../db.ts';

/**
 * GitHub webhook deliveries (persisted before they are answered, processed from here), what each
 * one did per workspace, and the branch heads the reconciler has seen.
 */
export default (d: SchemaDialect) => `
CREATE TABLE webhook_deliveries (
  seq ${d.serialKey},
  -- X-GitHub-Delivery: a redelivery carries the same id, so this is what makes a delivery count once
  delivery_id TEXT NOT NULL UNIQUE,
  event TEXT NOT NULL,
  action TEXT,
  installation_id ${d.bigint},
  repository TEXT,
  ref TEXT,
  after_sha TEXT,
  -- the verified body; cleared once processed (the results below are what is kept)
  payload TEXT,
  status TEXT NOT NULL,
  summary TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  received_at TEXT NOT NULL,
  processed_at TEXT
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_received ON webhook_deliveries (received_at);

-- Which workspaces may see a delivery in their log: those linked to its installation, and those
-- owning a deployment of the pushed repository.
CREATE TABLE webhook_delivery_tenants (
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(delivery_id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  PRIMARY KEY (tenant_id, delivery_id)
);
CREATE INDEX webhook_delivery_tenants_by_delivery ON webhook_delivery_tenants (delivery_id);

-- One line per deployment (or per linked integration, for installation events) a delivery touched.
CREATE TABLE webhook_delivery_results (
  seq ${d.serialKey},
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(delivery_id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  deployment_id TEXT,
  deployment_name TEXT,
  integration_id TEXT,
  result TEXT NOT NULL,
  revision_id TEXT,
  reason TEXT
);
CREATE INDEX webhook_delivery_results_by_delivery ON webhook_delivery_results (delivery_id, tenant_id);

-- The branch head the reconciler last saw per deployment: its baseline when the newest revision
-- was built from a branch name without a known commit.
CREATE TABLE reconcile_heads (
  deployment_id TEXT PRIMARY KEY REFERENCES deployments(id) ON DELETE CASCADE,
  repo_ref TEXT NOT NULL,
  sha TEXT NOT NULL,
  seen_at TEXT NOT NULL
);

-- Every github deployment of a repository, whatever its branch or build_on_push: the delivery log
-- reports why each one did not build.
CREATE INDEX deployments_by_repo ON deployments (repo_url_key);
`;
