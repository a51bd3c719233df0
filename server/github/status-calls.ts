import { TokenRefused } from '../domain/repository-access.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import type { GithubStore, OutboxEvent } from '../store/github.ts';
import { type GithubApi, GithubApiError } from './github-api.ts';
import type { GithubPace } from './github-pace.ts';
import type { InstallationTokens } from './installation-tokens.ts';
import { isRateLimited, rateLimitedUntil } from './rate-limits.ts';
import type { Target } from './status-target.ts';

/** A call could not be made now: the event is tried again later, from the call that failed. */
export class TryLater extends Error {
  readonly untilMs: number | null;
  constructor(message: string, untilMs: number | null) {
    super(message);
    this.untilMs = untilMs;
  }
}

/** The installation's pace is full until `untilMs`: the event waits its turn, and the pass goes on with other installations' events. */
export class WaitsItsTurn extends Error {
  readonly untilMs: number;
  constructor(untilMs: number) {
    super("waiting for the installation's pace");
    this.untilMs = untilMs;
  }
}

export type StatusCallsDeps = {
  api: GithubApi;
  tokens: InstallationTokens;
  github: GithubStore;
  pace: GithubPace;
  clock: Clock;
  log: Logger;
  /** Whether the sender is stopping: an inline call stops waiting for its pace. */
  stopped: () => boolean;
};

/** A content-creating call of the status outbox: what it sends, and how to see whether GitHub already has it. */
export type StatusCall = {
  revisionId: string;
  /** What is recorded as sent: the kind of call (`deployment`, `deployment_status`, `commit_status`, `check_run`) and its state. */
  call: string;
  state: string;
  request: { method: 'POST' | 'PATCH'; path: string; body: unknown };
  /** After a crash in the middle of this call: whether GitHub took it (then it is not made again). */
  alreadyThere: () => Promise<boolean>;
  onAnswer?: (answer: unknown) => void;
};

/**
 * The calls the status outbox makes to GitHub for one repository (a `Target`): each made once
 * (recorded before and after it), under the installation's pace, with its token, and sorted into
 * what is tried again later (`TryLater`) and what GitHub refused for good.
 */
export class StatusCalls {
  readonly #deps: StatusCallsDeps;

  constructor(deps: StatusCallsDeps) {
    this.#deps = deps;
  }

  /**
   * One content-creating call, unless already made: recorded before (so a crash mid-call is
   * known) and after (so it is never made again). Answers false when GitHub refused it for good
   * (logged; the event goes on), throws TryLater when it should be tried again.
   *
   * The record before is a row of its own (`<state>:sending` in github_sent), not the event's
   * outcome: a retry rewrites the outcome, so a check of GitHub's list that failed after a crash
   * (a 503, a timeout) used to forget the call was under way, and the next attempt made it again.
   */
  async once(event: OutboxEvent, target: Target, made: StatusCall): Promise<boolean> {
    const { github, clock, log } = this.#deps;
    const { revisionId, call, state, request } = made;
    if (await github.wasSent(revisionId, call, state)) return true;
    const sending = `${state}:sending`;
    if ((await github.wasSent(revisionId, call, sending)) && (await this.#safely(target, made.alreadyThere))) {
      await github.markSent(revisionId, call, state, clock.now());
      return true;
    }
    await this.paced(target);
    try {
      const token = await this.#token(target);
      await github.markSent(revisionId, call, sending, clock.now());
      const answer = await this.#deps.api.request({ ...request, auth: { kind: 'token', token } });
      made.onAnswer?.(answer);
    } catch (error) {
      if (error instanceof GithubApiError && error.status === 422 && /maximum number of statuses/i.test(error.message)) {
        log.warn('github: GitHub keeps no more statuses for this commit and context; this one is dropped', {
          revision_id: revisionId,
          call,
          state,
          path: request.path,
        });
        await github.markSent(revisionId, call, state, clock.now());
        return false;
      }
      this.#retryable(error, target, event.attempts);
      log.error('github: GitHub refused a status; it is dropped', { revision_id: revisionId, call, state, error: (error as Error).message });
      await github.markSent(revisionId, call, `${state}:refused`, clock.now());
      return false;
    }
    await github.markSent(revisionId, call, state, clock.now());
    return true;
  }

  /** A call made at once, outside the outbox (waiting for the installation's pace here). */
  async now(target: Target, request: { method: 'POST'; path: string; body: unknown }): Promise<void> {
    await this.paced(target, 'inline');
    const token = await this.#deps.tokens.forRepository(target.installationId, target.repository, target.write);
    await this.#deps.api.request({ ...request, auth: { kind: 'token', token } });
  }

  /** Whether one of the statuses listed at `path` matches. */
  async listed(target: Target, path: string, match: (status: { state?: string; context?: string }) => boolean): Promise<boolean> {
    const statuses = await this.get<Array<{ state?: string; context?: string }>>(target, path);
    return statuses.some(match);
  }

  async get<T>(target: Target, path: string): Promise<T> {
    try {
      return await this.#deps.api.request<T>({ method: 'GET', path, auth: { kind: 'token', token: await this.#token(target) } });
    } catch (error) {
      this.#retryable(error, target);
      if (error instanceof TokenRefused) throw error;
      throw new TryLater((error as Error).message, null);
    }
  }

  /**
   * Takes a slot of the installation's pace. An outbox call whose installation is paced throws
   * WaitsItsTurn, so one installation's queue never holds up another's in the same pass (GitHub
   * counts per installation); `inline` waits here instead (a refusal sent outside the outbox).
   */
  async paced(target: Target, mode: 'outbox' | 'inline' = 'outbox'): Promise<void> {
    const { pace, clock } = this.#deps;
    for (let wait = pace.take(target.installationId); wait > 0; wait = pace.take(target.installationId)) {
      if (mode === 'outbox') throw new WaitsItsTurn(Date.parse(clock.now()) + wait);
      if (this.#deps.stopped()) throw new TryLater('stopping', null);
      await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 1000)));
    }
  }

  /**
   * Throws TryLater for what may pass (5xx, timeouts, a rate limit, a token GitHub no longer
   * takes); returns for a refusal for good, a token GitHub will not mint included (a repository not
   * selected, permissions not accepted, the installation gone): those wait for a person on GitHub.
   */
  #retryable(error: unknown, target: Target, attempts = 0): void {
    if (error instanceof TryLater) throw error;
    if (error instanceof TokenRefused) return;
    if (isRateLimited(error)) {
      // Never dropped for a limit: the installation's calls wait as long as GitHub's rules say.
      const until = rateLimitedUntil(error.headers, attempts, Date.parse(this.#deps.clock.now()));
      this.#deps.pace.pause(target.installationId, until);
      throw new TryLater(error.message, until);
    }
    if (error instanceof GithubApiError) {
      if (error.status >= 500) throw new TryLater(error.message, null);
      if (error.status === 401) {
        this.#deps.tokens.forget(target.installationId, target.repository, target.write);
        throw new TryLater(error.message, null);
      }
      return;
    }
    // Network errors and timeouts: GitHub may be back later.
    throw new TryLater(error instanceof Error ? error.message : String(error), null);
  }

  async #safely(target: Target, check: () => Promise<boolean>): Promise<boolean> {
    try {
      return await check();
    } catch (error) {
      this.#retryable(error, target);
      return false;
    }
  }

  async #token(target: Target): Promise<string> {
    try {
      return await this.#deps.tokens.forRepository(target.installationId, target.repository, target.write);
    } catch (error) {
      this.#retryable(error, target);
      // A mint refused for good goes to the caller as it is: the call is dropped with GitHub's reason.
      if (error instanceof TokenRefused) throw error;
      throw new TryLater(`no token: ${(error as Error).message}`, null);
    }
  }
}
