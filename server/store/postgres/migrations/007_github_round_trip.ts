/** The GitHub round trip (contract §12): kept equivalent to SQLite's migration 014, which says what each table is for. */
export default `
CREATE TABLE github_setup_states (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  name TEXT,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE github_installation_accounts (
  integration_id TEXT PRIMARY KEY,
  installation_id BIGINT NOT NULL,
  account_login TEXT NOT NULL,
  account_id BIGINT NOT NULL,
  account_type TEXT NOT NULL,
  verified_at TEXT NOT NULL
);

CREATE TABLE github_outbox (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  revision_id TEXT NOT NULL,
  deployment_id TEXT NOT NULL,
  event TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT,
  done_at TEXT,
  outcome TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX github_outbox_pending ON github_outbox (revision_id, id) WHERE done_at IS NULL;

CREATE TABLE github_sent (
  revision_id TEXT NOT NULL,
  call TEXT NOT NULL,
  state TEXT NOT NULL,
  sent_at TEXT NOT NULL,
  PRIMARY KEY (revision_id, call, state)
);

CREATE TABLE github_deployments (
  revision_id TEXT PRIMARY KEY,
  deployment_id TEXT NOT NULL,
  github_deployment_id BIGINT NOT NULL,
  installation_id BIGINT NOT NULL,
  owner TEXT NOT NULL,
  repo TEXT NOT NULL,
  sha TEXT NOT NULL,
  environment TEXT NOT NULL,
  environment_url TEXT,
  log_url TEXT,
  last_state TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX github_deployments_by_deployment ON github_deployments (deployment_id);

CREATE FUNCTION github_outbox_now() RETURNS TEXT LANGUAGE sql AS $$
  SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

CREATE FUNCTION github_outbox_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status)
     AND EXISTS (SELECT 1 FROM deployments d JOIN github_installation_accounts a ON a.integration_id = d.integration_id WHERE d.id = NEW.deployment_id) THEN
    INSERT INTO github_outbox (revision_id, deployment_id, event, created_at) VALUES (NEW.id, NEW.deployment_id, NEW.status, github_outbox_now());
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER github_outbox_revision AFTER INSERT OR UPDATE OF status ON revisions FOR EACH ROW EXECUTE FUNCTION github_outbox_revision();

CREATE FUNCTION github_outbox_deployment_deleting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status = 'AWAITING_DELETE' AND OLD.status IS DISTINCT FROM 'AWAITING_DELETE' THEN
    INSERT INTO github_outbox (revision_id, deployment_id, event, created_at)
    SELECT g.revision_id, NEW.id, 'DELETED', github_outbox_now() FROM github_deployments g WHERE g.deployment_id = NEW.id;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER github_outbox_deployment_deleting AFTER UPDATE OF status ON deployments FOR EACH ROW EXECUTE FUNCTION github_outbox_deployment_deleting();

-- Pull-request previews: which child deployment previews which pull request of which parent.
CREATE TABLE github_previews (
  deployment_id TEXT PRIMARY KEY,
  parent_deployment_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  pull_request INTEGER NOT NULL,
  last_activity_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (parent_deployment_id, pull_request)
);
`;
