import type { SecretBox } from '../crypto/secret-box.ts';
import { type ApiKeyStore, SqlApiKeyStore } from './api-keys.ts';
import type { Db } from './db.ts';
import { type DeploymentStore, SqlDeploymentStore } from './deployments.ts';
import { type IntegrationStore, SqlIntegrationStore } from './integrations.ts';
import { type ListenerStore, SqlListenerStore } from './listeners.ts';
import { type RevisionLeaseStore, SqlRevisionLeaseStore } from './revision-leases.ts';
import { type RevisionLogStore, SqlRevisionLogStore } from './revision-logs.ts';
import { type RevisionStore, SqlRevisionStore } from './revisions.ts';
import { NO_RULES, type StoreRules } from './rules.ts';
import { SqlStore } from './sql-store.ts';
import { SqlTeardownStore, type TeardownStore } from './teardowns.ts';
import { SqlTracingProjectStore, type TracingProjectStore } from './tracing-projects.ts';
import type { Store } from './types.ts';
import { SqlWorkspaceStore, type WorkspaceStore } from './workspaces.ts';

/** Whether the database answers and takes writes (readiness), and its close. */
export interface StoreHealth {
  close(): void;
  ping(): Promise<boolean>;
  /** Performs a real write and undoes it; throws the store's error when writes fail (readiness). */
  probeWrite(): Promise<void>;
}

/** The database's health on either dialect; `close` closes what the opener opened (SQLite's file). */
export class SqlStoreHealth extends SqlStore implements StoreHealth {
  readonly #close: () => void;

  constructor(db: Db, close: () => void = () => {}) {
    super(db);
    this.#close = close;
  }

  close(): void {
    this.#close();
  }

  async ping(): Promise<boolean> {
    return (await this.sql.row<{ ok: number }>('SELECT 1 AS ok'))?.ok === 1;
  }

  /**
   * A real write that tells whether the database takes writes now: one committed transaction that
   * inserts a row large enough to need fresh pages (a full disk, or a database at its page limit,
   * refuses it) and deletes it again, so the commit reaches the disk (a read-only database, an I/O
   * error or a lock held past the busy timeout fail it). The row lives in `schema_migrations` under
   * a version no migration uses (-1) and never outlives the transaction.
   */
  async probeWrite(): Promise<void> {
    await this.sql.tx(async (tx) => {
      await tx.run('DELETE FROM schema_migrations WHERE version = -1');
      await tx.run(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (-1, ${this.sql.dialect.pageFiller}, 'readiness probe')`);
      await tx.run('DELETE FROM schema_migrations WHERE version = -1');
    });
  }
}

/**
 * The stores the core `Store` is made of, one per resource. Each runs on the `Db` it is given: the
 * connection, or a caller's transaction (`new SqlRevisionStore(tx, box)` inside `db.tx`), so a
 * write that spans resources is still one transaction.
 */
export type CoreStores = {
  health: StoreHealth;
  apiKeys: ApiKeyStore;
  workspaces: WorkspaceStore;
  deployments: DeploymentStore;
  teardowns: TeardownStore;
  revisions: RevisionStore;
  revisionLeases: RevisionLeaseStore;
  revisionLogs: RevisionLogStore;
  listeners: ListenerStore;
  integrations: IntegrationStore;
  tracingProjects: TracingProjectStore;
};

/** Every core resource store on `db`; `replaced` swaps some for a database's own (SQLite's grouped creates). */
export function coreStores(db: Db, box: SecretBox, rules: StoreRules = NO_RULES, replaced: Partial<CoreStores> = {}): CoreStores {
  return {
    health: new SqlStoreHealth(db),
    apiKeys: new SqlApiKeyStore(db),
    workspaces: new SqlWorkspaceStore(db, rules),
    deployments: new SqlDeploymentStore(db, box, rules),
    teardowns: new SqlTeardownStore(db, box),
    revisions: new SqlRevisionStore(db, box, rules),
    revisionLeases: new SqlRevisionLeaseStore(db),
    revisionLogs: new SqlRevisionLogStore(db),
    listeners: new SqlListenerStore(db, rules),
    integrations: new SqlIntegrationStore(db, rules),
    tracingProjects: new SqlTracingProjectStore(db),
    ...replaced,
  };
}

/**
 * The one `Store` the wiring hands out (tenancy, keys, deployments, teardowns, revisions, leases,
 * logs, listeners, integrations, tracing projects): each of its methods is the resource store's
 * own, bound to it, so a call costs what a call on the resource store does. Features are typed with
 * the slices they use (`DeploymentStore & RevisionStore`…), which this satisfies.
 */
export function composeStore(parts: CoreStores): Store {
  const methods: Record<string, unknown> = {};
  for (const [resource, part] of Object.entries(parts)) {
    for (const name of methodNames(part)) {
      // Two resources answering one name would silently shadow each other.
      if (name in methods) throw new Error(`Two core stores answer ${name} (the second is ${resource})`);
      methods[name] = (part as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!.bind(part);
    }
  }
  // Inherited, as a class's methods are: a method set on the store itself (a test's stand-in)
  // shadows its own, and deleting it brings the store's back.
  return Object.create(methods) as Store;
}

/** The methods a store's own classes declare (what `SqlStore` gives every store stays its own). */
function methodNames(store: object): string[] {
  const names: string[] = [];
  for (let proto = Object.getPrototypeOf(store); proto && proto !== SqlStore.prototype && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== 'constructor' && typeof proto[name] === 'function' && !names.includes(name)) names.push(name);
    }
  }
  return names;
}

/** The core store on `db`, written once for both databases; `replaced` as in `coreStores` (PostgreSQL's pipelined create). */
export function openCoreStore(db: Db, box: SecretBox, rules: StoreRules = NO_RULES, replaced: Partial<CoreStores> = {}): Store {
  return composeStore(coreStores(db, box, rules, replaced));
}
