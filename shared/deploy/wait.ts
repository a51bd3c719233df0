import { type ApiClient, abortableSleep, TransientError } from '../client.ts';
import { isTerminal, type Revision, type RevisionStatus } from '../schemas/revision.ts';

/** One status the revision was seen in: `at` is the revision's `updated_at` (when it moved there). */
export type Transition = { status: RevisionStatus; at: string; message: string | null };

export type WaitOptions = {
  /** Epoch milliseconds: the one deadline for the whole wait. */
  deadline: number;
  /** Pause between requests when the server answers without holding them (no long-poll on the way). */
  pollIntervalMs: number;
  signal?: AbortSignal | undefined;
  onStatus?: (transition: Transition, revision: Revision) => void;
  onInfo?: (message: string) => void;
  /** Injected clock and sleep, for tests. */
  now?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
};

export type WaitResult = { revision: Revision; timedOut: boolean };

/** The longest a single held request asks for; well under the server's cap of 60 s and common proxy idle limits. */
const HOLD_SECONDS = 30;

/**
 * Follows one revision until it reaches a terminal status or the deadline passes, using the
 * server's conditional long-poll (`If-None-Match` + `Prefer: wait`), so a change is seen as soon as
 * the server makes it rather than at the next poll. A transient error (the client has already
 * retried it) does not end the wait: it is reported and tried again until the deadline.
 */
export async function waitForRevision(client: ApiClient, deploymentId: string, revisionId: string, options: WaitOptions): Promise<WaitResult> {
  const now = options.now ?? Date.now;
  const { signal } = options;
  const remaining = () => options.deadline - now();
  const sleep = options.sleep ?? abortableSleep;
  const pause = (ms: number) => sleep(Math.max(0, Math.min(ms, remaining())), signal);

  let etag: string | null = null;
  // A holder rather than a `let`: TypeScript does not follow assignments made inside `see`.
  const seen: { current: Revision | null } = { current: null };
  const see = (revision: Revision) => {
    if (seen.current?.status !== revision.status)
      options.onStatus?.({ status: revision.status, at: revision.updated_at, message: revision.status_message }, revision);
    seen.current = revision;
  };

  for (;;) {
    const current = seen.current;
    if (current && isTerminal(current.status)) return { revision: current, timedOut: false };
    if (remaining() <= 0) {
      if (current) return { revision: current, timedOut: true };
      throw new TransientError(`The revision ${revisionId} could not be read before the wait timed out.`);
    }
    try {
      if (!current || etag === null) {
        const read = await client.getRevision(deploymentId, revisionId, signal);
        etag = read.etag;
        see(read.revision);
        // Without an ETag the server cannot hold the request: fall back to polling.
        if (etag === null && !isTerminal(read.revision.status)) await pause(options.pollIntervalMs);
        continue;
      }
      // Never hold past the deadline: the wait must end when it says it does.
      const hold = Math.min(HOLD_SECONDS, remaining() / 1000);
      const asked = now();
      const answer = await client.pollRevision(deploymentId, revisionId, etag, hold, signal);
      etag = answer.etag;
      if (answer.changed) {
        see(answer.revision);
      } else if (hold >= 1 && now() - asked < (hold * 1000) / 2) {
        // A 304 long before the time asked: something on the way does not hold requests.
        await pause(options.pollIntervalMs);
      }
    } catch (error) {
      if (!(error instanceof TransientError)) throw error;
      options.onInfo?.(`${error.message}; trying again until the wait times out.`);
      await pause(options.pollIntervalMs);
    }
  }
}
