import { leaseQueries } from './queries/leases.ts';
import { SqlStore } from './sql-store.ts';
import type { RevisionRecord, WorkLease } from './types.ts';

/**
 * Which server process runs which started revision: each process's lease, the revisions that name
 * it, and the takeover of those a dead process left (docs/decisions/work-leases.md).
 */
export interface RevisionLeaseStore {
  /**
   * Takes over up to `limit` started, unfinished revisions no live process holds: their process's
   * lease (`renewProcessLease`) has passed, or, never held, they have not changed since
   * `staleBefore`. Each becomes `lease.owner`'s; a process whose revisions were all taken is
   * forgotten (its next renewal finds no lease). Renews the caller's own lease first, and takes
   * nothing when that had lapsed (the caller's next `renewProcessLease` says so, and it re-checks
   * what it holds). Atomic per revision: of two processes asking at once, each revision goes to one.
   */
  takeOverRevisions(lease: WorkLease, staleBefore: string, limit: number): Promise<Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>>;
  /**
   * The lease of the process itself, which covers every revision naming it: one row write however
   * many it holds. True when it was still live; false when it had lapsed or did not exist (it is
   * live again from now on, but what the process held may have been taken over meanwhile).
   */
  renewProcessLease(lease: WorkLease): Promise<boolean>;
  /** Ends the process's lease now (a clean shutdown): its revisions are free at the next sweep. */
  endProcessLease(owner: string, now: string): Promise<void>;
  /**
   * Makes the given unfinished revisions `owner`'s when nobody holds them yet (started on create or
   * by `startNextRevision`); answers the ids now held by `owner`, those held already included. Holds
   * nothing while `owner` has no lease row, so a revision never names a process that has none. One
   * statement.
   */
  holdRevisions(ids: readonly string[], owner: string): Promise<string[]>;
  /** Gives up `owner`'s hold on these revisions: any process takes them over once they are stale. */
  releaseRevisions(ids: readonly string[], owner: string): Promise<void>;
  /** Deployments with a queued revision and none in progress: their start was lost with a process. */
  listStalledQueuedDeployments(): Promise<string[]>;
}

export class SqlRevisionLeaseStore extends SqlStore implements RevisionLeaseStore {
  readonly #lease = leaseQueries(this.sql.dialect);

  async takeOverRevisions(lease: WorkLease, staleBefore: string, limit: number): Promise<Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>> {
    const { owner } = lease;
    type Taken = Pick<RevisionRecord, 'id' | 'deployment_id'>;
    return this.sql.tx(async (tx) => {
      if ((await tx.run(this.#lease.renewProcessLease, { owner, until: lease.until, now: lease.now })) === 0) return [];
      const taken: Taken[] = [];
      for (const { process_id: dead } of await tx.rows<{ process_id: string }>(this.#lease.deadProcesses, { owner, now: lease.now })) {
        const wanted = limit - taken.length;
        if (wanted <= 0) break;
        const rows = await tx.rows<Taken>(this.#lease.takeOverFromProcess, { owner, dead, limit: wanted });
        taken.push(...rows);
        if (rows.length < wanted) await tx.run(this.#lease.forgetProcess, { dead });
      }
      if (taken.length < limit)
        taken.push(...(await tx.rows<Taken>(this.#lease.takeOverUnheld, { owner, stale_before: staleBefore, limit: limit - taken.length })));
      return taken;
    });
  }

  async renewProcessLease(lease: WorkLease): Promise<boolean> {
    const params = { owner: lease.owner, until: lease.until, now: lease.now };
    if ((await this.sql.run(this.#lease.renewProcessLease, params)) === 1) return true;
    await this.sql.run(this.#lease.restartProcessLease, { owner: lease.owner, until: lease.until });
    return false;
  }

  async endProcessLease(owner: string, now: string): Promise<void> {
    await this.sql.run(this.#lease.endProcessLease, { owner, now });
  }

  async holdRevisions(ids: readonly string[], owner: string): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.sql.rows<{ id: string }>(this.#lease.holdRevisions, { owner, ids: this.sql.dialect.list(ids) });
    return rows.map((row) => row.id);
  }

  async releaseRevisions(ids: readonly string[], owner: string): Promise<void> {
    if (ids.length > 0) await this.sql.run(this.#lease.releaseRevisions, { owner, ids: this.sql.dialect.list(ids) });
  }

  async listStalledQueuedDeployments(): Promise<string[]> {
    const rows = await this.sql.rows<{ deployment_id: string }>(this.#lease.stalledQueuedDeployments);
    return rows.map((row) => row.deployment_id);
  }
}
