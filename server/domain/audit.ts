import type { Clock } from '../lib/clock.ts';
import { type PollLoop, sweepLoop } from '../lib/poll-loop.ts';
import type { AuditEntry } from '../lib/request-scope.ts';
import type { Logger } from '../logger.ts';
import type { AuditQuery, AuditStore } from '../store/audit.ts';
import type { Principal } from './auth.ts';
import { ValidationFailed } from './errors.ts';

/** What a reader of `GET /v1/audit-events` may ask for. */
export type AuditListQuery = { resource_id?: string; actor?: string; since?: string; until?: string; cursor?: string; limit: number };

/** A console sign-in (or a refused one), as the console reports it. */
export type SignIn = {
  organizationId: string;
  /** The workspace the session was opened in; null when the key was refused before one was chosen. */
  workspaceId: string | null;
  keyId: string;
  organizationScoped: boolean;
  address: string | null;
  userAgent: string | null;
  succeeded: boolean;
  requestId?: string | null;
  /** A session opened (the default) or ended on request. */
  action?: 'sign_in' | 'sign_out';
};

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * The audit log (contract section 17). Changes made through the API write their entries in their
 * own transactions (the HTTP layer drafts the entry, the store writes it); this is what reads them
 * back, records what changed nothing (a refused change, a console sign-in), and forgets entries
 * older than the retention. Nothing here changes or deletes an entry otherwise.
 */
export class AuditLog {
  readonly #store: AuditStore;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #retentionDays: number;
  readonly #sweep: PollLoop;

  constructor(deps: { store: AuditStore; clock: Clock; log: Logger; retentionDays: number; lead: () => Promise<boolean> }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#retentionDays = deps.retentionDays;
    // Entries older than the retention are forgotten once an hour, in one process of those sharing the database.
    this.#sweep = sweepLoop({
      sweep: () => this.purge(),
      everyMs: HOUR_MS,
      atStart: true,
      lead: deps.lead,
      onRemoved: (removed) => this.#log.info('audit: removed entries past the retention', { removed, retention_days: this.#retentionDays }),
      onError: (error) => this.#log.warn('audit: the retention sweep failed; it runs again in an hour', { error: String(error) }),
    });
  }

  /** Writes an entry on its own (for what no transaction of a change carried). */
  record(entry: AuditEntry): Promise<void> {
    return this.#store.record(entry);
  }

  /**
   * Records a console sign-in, succeeded or refused: the console calls this once per attempt. Its
   * actor is the key (by id, never its value); the session itself is not an object of the API.
   */
  recordSignIn(signIn: SignIn): Promise<void> {
    return this.#store.record({
      id: crypto.randomUUID(),
      organization_id: signIn.organizationId,
      workspace_id: signIn.workspaceId,
      actor_kind: 'api_key',
      actor_id: signIn.keyId,
      actor_scope: signIn.organizationScoped ? 'organization' : 'workspace',
      address: signIn.address,
      user_agent: signIn.userAgent,
      action: signIn.action ?? 'sign_in',
      resource_type: 'console_session',
      resource_id: null,
      route: null,
      fields: [],
      outcome: signIn.succeeded ? 'succeeded' : 'failed',
      status: signIn.succeeded ? null : 401,
      request_id: signIn.requestId ?? null,
      created_at: this.#clock.now(),
    });
  }

  /** Entries the principal may see, newest first: a workspace key its workspace's, an organization key the organization's. */
  async list(principal: Principal, query: AuditListQuery): Promise<{ entries: AuditEntry[]; next_cursor: string | null }> {
    const scoped: AuditQuery = {
      organizationId: principal.organizationId,
      workspaceId: principal.organizationScoped ? undefined : principal.workspaceId,
      resourceId: query.resource_id,
      actor: query.actor,
      since: query.since,
      until: query.until,
      beforeSeq: query.cursor === undefined ? undefined : decodeCursor(query.cursor),
      limit: query.limit,
    };
    const { entries, more } = await this.#store.list(scoped);
    const last = entries.at(-1);
    return { entries: entries.map(({ seq: _seq, ...entry }) => entry), next_cursor: more && last ? encodeCursor(last.seq) : null };
  }

  /** Starts forgetting entries older than the retention (now, then hourly). */
  start(): void {
    this.#sweep.start();
  }

  stop(): void {
    this.#sweep.stop();
  }

  /** Removes the entries older than the retention now; answers how many. */
  purge(): Promise<number> {
    const cutoff = new Date(Date.parse(this.#clock.now()) - this.#retentionDays * DAY_MS).toISOString();
    return this.#store.purgeBefore(cutoff);
  }
}

/** The cursor is the last entry's position, opaque to clients. */
function encodeCursor(seq: number): string {
  return Buffer.from(`a${seq}`).toString('base64url');
}

function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString();
  const seq = /^a([0-9]{1,15})$/.exec(text)?.[1];
  if (seq === undefined) throw new ValidationFailed([{ loc: ['query', 'cursor'], msg: 'Not a cursor this server gave out', type: 'value_error' }]);
  return Number(seq);
}
