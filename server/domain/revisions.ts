import { revisionConfig } from '../../shared/schemas/deployment.ts';
import type { ProjectLogs, ProjectLogsRequest, Revision, RevisionListQuery, RevisionLogs, RevisionLogsQuery } from '../../shared/schemas/revision.ts';
import type { Gone, RevisionWatch } from '../lib/revision-watch.ts';
import type { DeploymentStore, Page, RevisionLogStore, RevisionRecord, RevisionStore, TracingProjectStore } from '../store/types.ts';
import { NotFound } from './errors.ts';
import type { RevisionWait } from './revision-wait.ts';

/** The revision as the API shows it. */
export function publicRevision(revision: RevisionRecord): Revision {
  return publicWithConfig(revision, revisionConfig(revision.source_revision_config));
}

/**
 * `publicRevision` of a record the store read just now, whose config the store's row mapping
 * (`toRevision`) already made the API's: taken as it is, not made a second time (the GET revision
 * lane's plain GET, where each object counts).
 */
export function publicStoredRevision(revision: RevisionRecord): Revision {
  return publicWithConfig(revision, revision.source_revision_config);
}

function publicWithConfig(revision: RevisionRecord, config: Revision['source_revision_config']): Revision {
  return {
    id: revision.id,
    deployment_id: revision.deployment_id,
    created_at: revision.created_at,
    updated_at: revision.updated_at,
    status: revision.status,
    status_message: revision.status_message,
    source: revision.source,
    source_revision_config: config,
    trigger: revision.trigger,
  };
}

/** An entity tag that changes whenever the revision does. */
export function revisionEtag(revision: RevisionRecord): string {
  return `"${revision.id}.${revision.version}"`;
}

/** The slices of the store that reading revisions and their logs uses. */
type RevisionReadStore = RevisionStore & RevisionLogStore & Pick<DeploymentStore, 'getDeployment'> & Pick<TracingProjectStore, 'getTracingProject'>;

/** Reading revisions, their logs, and waiting for a change. */
export class Revisions {
  readonly #store: RevisionReadStore;
  readonly #watch: RevisionWatch;
  /**
   * The reads `reread` started in this turn of the event loop, by tenant, deployment and revision:
   * what one wake-up without the changed record (another process's change, a resync, a thousand
   * waiters reaching their deadline together) asks for a thousand times is read once.
   */
  readonly #rereads = new Map<string, Promise<RevisionRecord>>();

  constructor(deps: { store: RevisionReadStore; watch: RevisionWatch }) {
    this.#store = deps.store;
    this.#watch = deps.watch;
  }

  /** The revision, or null when there is none (no error made: the HTTP fast path falls back then). */
  find(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null> {
    return this.#store.getRevision(tenantId, deploymentId, revisionId);
  }

  /**
   * `find` with a callback, called once with the error or the revision (null when there is none):
   * in this call where the store reads synchronously (SQLite), so the GET revision fast lane's
   * plain GET makes no promise between its route and the row.
   */
  read(tenantId: string, deploymentId: string, revisionId: string, done: (error: unknown, revision?: RevisionRecord | null) => void): void {
    this.#store.readRevision(tenantId, deploymentId, revisionId, done);
  }

  async get(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord> {
    const revision = await this.#store.getRevision(tenantId, deploymentId, revisionId);
    if (!revision) {
      if (!(await this.#store.getDeployment(tenantId, deploymentId))) throw new NotFound(`Deployment ID ${deploymentId} not found.`);
      throw new NotFound(`Revision ID ${revisionId} not found.`);
    }
    return revision;
  }

  /**
   * `get` for waiters woken together without the changed record: they call it in one synchronous
   * loop (`RevisionWatch.notify`, or the deadline timer's), and the calls of that turn for the same
   * revision share one read, started after the wake-up, so it sees what woke them. A read is shared
   * only within the turn it started in: a later wake-up reads again. (Each waiter re-read the
   * revision before: a notice from another process woke a thousand waiters into a thousand reads.)
   */
  reread(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord> {
    const key = JSON.stringify([tenantId, deploymentId, revisionId]);
    let read = this.#rereads.get(key);
    if (read === undefined) {
      if (this.#rereads.size === 0) queueMicrotask(() => this.#rereads.clear());
      read = this.get(tenantId, deploymentId, revisionId);
      this.#rereads.set(key, read);
    }
    return read;
  }

  /**
   * The conditional long-poll: while `isKnown` accepts the revision's ETag (the client holds that
   * version), wait up to `waitMs` for it to change. Answers the revision and whether the client's
   * copy is out of date.
   */
  async getWhenChanged(
    tenantId: string,
    deploymentId: string,
    revisionId: string,
    isKnown: (etag: string) => boolean,
    waitMs: number,
    gone?: Gone,
  ): Promise<{ revision: RevisionRecord; changed: boolean }> {
    let first: RevisionRecord | null = await this.get(tenantId, deploymentId, revisionId);
    if (!isKnown(revisionEtag(first)) || waitMs <= 0) return { revision: first, changed: !isKnown(revisionEtag(first)) };
    // No revision record is held while waiting (a thousand waiters held two copies each, most of
    // their memory beyond the socket's): the change brings its own record, and a wait that ends
    // without one reads the revision again. One async function for the whole wait: handing it to
    // another made each waiter hold the promise chain between the two (two closures, a context, a
    // reaction); the re-read after registering is a method of its own, so its record is not a
    // local of this frame while it is suspended.
    first = null;
    // Register before reading again, so a change between the two reads is not missed.
    const waiter = this.#watch.wait(revisionId, waitMs, gone);
    const changedMeanwhile = await this.#readIfChanged(tenantId, deploymentId, revisionId, isKnown);
    if (changedMeanwhile) {
      waiter.cancel();
      return { revision: changedMeanwhile, changed: true };
    }
    const changed = await waiter.changed;
    const revision = (changed ? (waiter.value() as RevisionRecord | undefined) : undefined) ?? (await this.get(tenantId, deploymentId, revisionId));
    return { revision, changed: !isKnown(revisionEtag(revision)) };
  }

  /**
   * `getWhenChanged` for a caller whose request is its own waiter (the GET revision fast lane):
   * `wait.answered` is called once, with the error or the answer. While it waits, a request holds
   * that one object, not a suspended async function with the promises between it and its caller
   * (most of what a held request held beyond a bare server's, test/e2e/long-poll-memory.test.ts).
   */
  hold(wait: RevisionWait, waitMs: number): void {
    this.get(wait.tenantId, wait.deploymentId, wait.revisionId).then(
      (first) => {
        if (!wait.isKnown(revisionEtag(first)) || waitMs <= 0) return wait.answer(first);
        wait.revisions = this;
        // As getWhenChanged: register before reading again, so a change between the two reads is not missed.
        // Whichever ends first answers: the wait (then a failed second read is the wait's to ignore) or that read's failure.
        this.#watch.hold(wait, waitMs);
        this.#readIfChanged(wait.tenantId, wait.deploymentId, wait.revisionId, (etag) => wait.isKnown(etag)).then(
          (changedMeanwhile) => {
            if (changedMeanwhile) wait.announce(changedMeanwhile);
          },
          (error: unknown) => wait.failed(error),
        );
      },
      (error: unknown) => wait.answered(error),
    );
  }

  async #readIfChanged(tenantId: string, deploymentId: string, revisionId: string, isKnown: (etag: string) => boolean): Promise<RevisionRecord | null> {
    const revision = await this.get(tenantId, deploymentId, revisionId);
    return isKnown(revisionEtag(revision)) ? null : revision;
  }

  async list(tenantId: string, deploymentId: string, query: RevisionListQuery): Promise<Page<RevisionRecord>> {
    if (!(await this.#store.getDeployment(tenantId, deploymentId))) throw new NotFound(`Deployment ID ${deploymentId} not found.`);
    return this.#store.listRevisions(tenantId, deploymentId, query);
  }

  /**
   * The log routes `langgraph deploy logs` calls. `projectId` is the deployment's id (what the CLI
   * sends) or its tracing project's id; without `revisionId`, the deployment's live revision (the
   * latest one while none is live yet).
   */
  async projectLogs(
    tenantId: string,
    projectId: string,
    revisionId: string | null,
    type: 'build' | 'deploy',
    request: ProjectLogsRequest,
  ): Promise<ProjectLogs> {
    let deployment = await this.#store.getDeployment(tenantId, projectId);
    if (!deployment) {
      const project = await this.#store.getTracingProject(tenantId, projectId);
      deployment = project?.deployment_id ? await this.#store.getDeployment(tenantId, project.deployment_id) : null;
    }
    if (!deployment) throw new NotFound(`Project ID ${projectId} not found.`);
    const target = revisionId ?? deployment.active_revision_id ?? deployment.latest_revision_id;
    if (!target) return { logs: [], next_offset: null };
    await this.get(tenantId, deployment.id, target);
    const level = request.level === 'warning' ? 'warn' : (request.level ?? undefined);
    const order = request.order ?? 'desc';
    const cursor = request.offset == null ? 0 : Number(request.offset);
    const { logs, more } = await this.#store.searchLogs(target, {
      type,
      order,
      cursor,
      limit: request.limit ?? 50,
      level,
      query: request.query ?? undefined,
      startTime: request.start_time ? new Date(request.start_time).toISOString() : undefined,
      endTime: request.end_time ? new Date(request.end_time).toISOString() : undefined,
    });
    return {
      logs: logs.map(({ seq, timestamp, level: lineLevel, message }) => ({ id: String(seq), timestamp, level: lineLevel, message })),
      next_offset: nextOffset(order, cursor, logs.at(-1)?.seq, more),
    };
  }

  async logs(tenantId: string, deploymentId: string, revisionId: string, query: RevisionLogsQuery): Promise<RevisionLogs> {
    await this.get(tenantId, deploymentId, revisionId);
    const { logs, lastSeq, more } = await this.#store.readLogs(revisionId, query.type, query.offset, query.limit);
    return { logs, next_offset: nextOffset('asc', query.offset, lastSeq ?? undefined, more) };
  }
}

/**
 * The cursor an answer hands back (contract §4). Clients keep only what the server gives them
 * (`langgraph deploy --verbose` and `logs --follow` do `offset = next_offset or offset`), so in
 * ascending order it is always the cursor just past the last line answered, or the one asked when
 * none was: never null, or a follower would start over and print the log again. The cursor is the
 * line's sequence number, so lines that share a timestamp are never read twice. Newest first, a
 * page is followed back in time only while older lines remain (null at the oldest).
 */
function nextOffset(order: 'asc' | 'desc', asked: number, lastSeq: number | undefined, more: boolean): number | null {
  if (order === 'asc') return lastSeq ?? asked;
  return more ? (lastSeq ?? null) : null;
}
