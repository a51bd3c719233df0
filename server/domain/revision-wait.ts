import { Waiter } from '../lib/revision-watch.ts';
import type { RevisionRecord } from '../store/types.ts';
import { type Revisions, revisionEtag } from './revisions.ts';

/** What a conditional GET of a revision answers: the revision, its ETag, and whether the client's copy is out of date. */
export type RevisionAnswer = { revision: RevisionRecord; etag: string; changed: boolean };

/** The record `etagOf` last made an ETag for, and that ETag. */
let etagRecord: RevisionRecord | undefined;
let etagText = '';

/**
 * The revision's ETag, made once per record: the waiters woken by one change are answered one
 * after another with the same record, and share one string, compared with each If-None-Match and
 * written in each answer, where each made its own twice (two concatenations, each flattened
 * again by the comparison and by Node's header writing). One entry, not a map: a record is
 * answered in one synchronous loop, and a plain GET's record costs one comparison here.
 */
function etagOf(revision: RevisionRecord): string {
  if (revision !== etagRecord) {
    etagRecord = revision;
    etagText = revisionEtag(revision);
  }
  return etagText;
}

/**
 * A conditional GET of one revision that may wait for it to change, as one object that is also its
 * own waiter (`Revisions.hold`): the GET revision fast lane holds a thousand of them at a time, and
 * a held request then holds this object, its `cancel` and what Node holds for any request, with no
 * closure, context or promise beside them (test/e2e/long-poll-memory.test.ts counts the bytes).
 * The caller's subclass says which version its client holds (`isKnown`), hears the answer once
 * (`answered`), and may listen for the client going away (`watchGone`, then `cancel`).
 */
export abstract class RevisionWait extends Waiter {
  readonly tenantId: string;
  readonly deploymentId: string;
  /** Where the revision is read again when the wait ends without the changed record (set by `Revisions.hold`). */
  revisions: Revisions | undefined;
  /** Whether `answered` has been called or is on its way (the wait and a failed read race for it). */
  #ended = false;

  constructor(tenantId: string, deploymentId: string, revisionId: string) {
    super(revisionId);
    this.tenantId = tenantId;
    this.deploymentId = deploymentId;
  }

  /** Whether `etag` names the version the client holds (its If-None-Match). */
  abstract isKnown(etag: string): boolean;

  /** Called once: with the error, or with the answer. */
  abstract answered(error: unknown, answer?: RevisionAnswer): void;

  /** Answers `revision`: changed when its ETag is not the one the client holds. */
  answer(revision: RevisionRecord): void {
    const etag = etagOf(revision);
    this.answered(null, { revision, etag, changed: !this.isKnown(etag) });
  }

  /** The read after registering failed: answers the error, unless the wait has answered already. */
  failed(error: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.cancel();
    this.answered(error);
  }

  protected override settled(changed: boolean, value: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    const announced = changed ? (value as RevisionRecord | undefined) : undefined;
    if (announced) return this.answer(announced);
    // Waiters woken together (a change announced without its record, deadlines reached at once) share one read.
    this.revisions!.reread(this.tenantId, this.deploymentId, this.revisionId).then(
      (revision) => this.answer(revision),
      (error: unknown) => this.answered(error),
    );
  }
}
