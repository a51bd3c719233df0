import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../../logger.ts';
import type { Coordination } from '../coordination.ts';
import type { PgDb } from './db.ts';

/** The one channel every control-plane process listens on (NOTIFY is per database, so per deployment of the control plane). */
const CHANNEL = 'control_plane';
/** How the listening sessions name themselves, so a process can count its peers (`pg_stat_activity`). */
const APPLICATION_PREFIX = 'control-plane:';
/** NOTIFY refuses payloads of 8000 bytes or more; ours are ids, far below. */
const MAX_PAYLOAD_BYTES = 7900;
/** The first of the two advisory-lock keys of leaderships (the migration lock uses the one-key form). */
const LEAD_LOCK_CLASS = 7_245_193;
/** The first key of `exclusive` locks: a class of its own, so no name there can take a leadership. */
const EXCLUSIVE_LOCK_CLASS = 7_245_194;
const EXCLUSIVE_POLL_MS = 25;
const DEFAULT_EXCLUSIVE_WAIT_MS = 20_000;
const RECONNECT_FIRST_MS = 100;
const RECONNECT_MAX_MS = 5_000;
const ACK_TOPIC = '_ack';
/** Notices sent in one statement at most (each its own `pg_notify` call). */
const NOTICES_PER_STATEMENT = 100;
const DEFAULT_ACK_TIMEOUT_MS = 2_000;
/**
 * How often the processes listening on the database are counted (`PgDb.sharedBy`): processes
 * started or stopped change how many reads each sends at a time within this. One look at
 * pg_stat_activity on the listening connection.
 */
const COUNT_PROCESSES_MS = 5_000;
/** The listening sessions of the control plane on this database: this process's and its peers'. */
const LISTENING_SESSIONS = 'SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1';
/**
 * Those of them connected from this process's address: the processes that share its cores. Peers on
 * other hosts have cores of their own and must not shrink this process's share (a Unix socket's
 * sessions have no address, and match each other).
 */
const SAME_HOST_SESSIONS = `${LISTENING_SESSIONS} AND client_addr IS NOT DISTINCT FROM inet_client_addr()`;

/** What travels in a notice: the sender (a random id per process), the topic, the key; `a` asks for acknowledgements. */
type Notice = { p: string; t: string; k: string; a?: string; to?: string };

/**
 * PostgreSQL LISTEN/NOTIFY on ONE dedicated connection (not from the pool: a pooled connection
 * goes back to the pool and stops listening). Notices are sent through the pool with `pg_notify`,
 * so they leave at the sending statement's commit. The same connection holds the leaderships'
 * session advisory locks: when the process dies or the connection drops, PostgreSQL frees them and
 * another process takes over at its next attempt. A dropped connection is reopened with backoff and
 * a resync is fired (notices sent meanwhile were missed). Nothing here ever throws at its callers.
 */
export class PgCoordination implements Coordination {
  readonly shared = true;
  /** This process's random id: its own notices come back to it and are told apart by it. */
  readonly processId = randomBytes(8).toString('hex');
  readonly #url: string;
  readonly #db: PgDb;
  readonly #log: Logger;
  readonly #handlers = new Map<string, Set<(key: string) => void>>();
  readonly #resyncHandlers = new Set<() => void>();
  readonly #leading = new Set<string>();
  /** Notices waiting for this turn's statement. */
  readonly #outbox: Array<{ payload: string; topic: string; sent: (ok: boolean) => void }> = [];
  readonly #acks = new Map<string, { waiting: Set<string>; done: (all: boolean) => void }>();
  #client: pg.Client | null = null;
  #reconnectTimer: NodeJS.Timeout | null = null;
  #countTimer: NodeJS.Timeout | null = null;
  #backoff = RECONNECT_FIRST_MS;
  /** Set while notices may be missed (a connection lost or never made); the next connection fires a resync. */
  #deaf = false;
  #closed = false;

  private constructor(url: string, db: PgDb, log: Logger) {
    this.#url = url;
    this.#db = db;
    this.#log = log;
  }

  /**
   * Opens the listening connection; when that fails, the process runs on and keeps trying in the
   * background. `countProcessesMs`: how often the processes on the database are counted.
   */
  static async open(url: string, db: PgDb, log: Logger, options: { countProcessesMs?: number } = {}): Promise<PgCoordination> {
    const coordination = new PgCoordination(url, db, log);
    if (!(await coordination.#connect())) coordination.#scheduleReconnect();
    coordination.#countTimer = setInterval(() => void coordination.#countProcesses(), options.countProcessesMs ?? COUNT_PROCESSES_MS);
    coordination.#countTimer.unref();
    return coordination;
  }

  /** Whether the listening connection is up. */
  get listening(): boolean {
    return this.#client !== null;
  }

  async #connect(): Promise<boolean> {
    const client = new pg.Client({
      connectionString: this.#url,
      application_name: `${APPLICATION_PREFIX}${this.processId}`,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      connectionTimeoutMillis: 10_000,
    });
    // Both may come for one loss; `#lost` acts once per connection.
    let ended = false;
    client.on('error', (error) => this.#lost(client, error));
    client.on('end', () => {
      ended = true;
      this.#lost(client);
    });
    client.on('notification', (message) => this.#received(message.payload));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (error) {
      this.#log.warn('coordination: could not open the listening connection; retrying with backoff', { error: String(error) });
      this.#deaf = true;
      client.removeAllListeners('end');
      client.end().catch(() => undefined);
      return false;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return false;
    }
    this.#client = client;
    this.#backoff = RECONNECT_FIRST_MS;
    // Lost between LISTEN and here (its 'end' was not ours yet to act on): handled as any loss.
    if (ended) {
      this.#lost(client);
      return true;
    }
    // A first connection made after a failed one is a resync as well: the process ran deaf meanwhile.
    if (this.#deaf) {
      this.#log.info('coordination: listening; caches dropped and waiters woken (notices may have been missed meanwhile)');
      this.#resync();
    }
    this.#deaf = false;
    void this.#countProcesses();
    return true;
  }

  /** Tells the pool how many processes on this host listen on the database now (itself among them); on an error it keeps the last count. */
  async #countProcesses(): Promise<void> {
    const client = this.#client;
    if (!client || this.#closed) return;
    try {
      const { rows } = await client.query<{ name: string }>(SAME_HOST_SESSIONS, [`${APPLICATION_PREFIX}%`]);
      this.#db.sharedBy(rows.length);
    } catch {
      // The connection's loss is handled by its own events; the next count comes with the next connection.
    }
  }

  #lost(client: pg.Client, error?: Error): void {
    if (this.#client !== client) return;
    this.#client = null;
    if (this.#closed) return;
    this.#deaf = true;
    this.#log.warn('coordination: the listening connection was lost; reconnecting', { error: error ? String(error) : undefined });
    for (const name of this.#leading)
      this.#log.warn('coordination: this process no longer leads (its connection, and with it the lock, is gone)', { singleton: name });
    this.#leading.clear();
    // Deaf from now until the connection is back: what is cached may change unheard. Drop it now,
    // and again once listening (see #connect).
    this.#resync();
    for (const pending of this.#acks.values()) pending.done(false);
    client.end().catch(() => undefined);
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#reconnectTimer) return;
    const wait = this.#backoff;
    this.#backoff = Math.min(this.#backoff * 2, RECONNECT_MAX_MS);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = null;
      void this.#connect().then((ok) => ok || this.#scheduleReconnect());
    }, wait);
    this.#reconnectTimer.unref();
  }

  #resync(): void {
    for (const handler of this.#resyncHandlers) this.#safely(() => handler(), 'resync');
  }

  #received(payload: string | undefined): void {
    let notice: Notice;
    try {
      notice = JSON.parse(payload ?? '') as Notice;
    } catch {
      this.#log.warn('coordination: ignored a notice that is not ours', { channel: CHANNEL });
      return;
    }
    if (typeof notice?.p !== 'string' || typeof notice.t !== 'string' || typeof notice.k !== 'string') return;
    if (notice.p === this.processId) return;
    if (notice.t === ACK_TOPIC) {
      if (notice.to !== this.processId) return;
      const pending = this.#acks.get(notice.k);
      pending?.waiting.delete(notice.p);
      if (pending && pending.waiting.size === 0) pending.done(true);
      return;
    }
    for (const handler of this.#handlers.get(notice.t) ?? []) this.#safely(() => handler(notice.k), notice.t);
    // Acknowledged only after the handlers ran: the sender's caller may rely on their effect.
    if (typeof notice.a === 'string') void this.#send({ p: this.processId, t: ACK_TOPIC, k: notice.a, to: notice.p });
  }

  #safely(run: () => void, topic: string): void {
    try {
      run();
    } catch (error) {
      this.#log.error('coordination: a notice handler failed', { topic, error: String(error) });
    }
  }

  /**
   * Queues a notice; the notices queued in one turn of the event loop leave in one statement (one
   * round trip however many stage changes a busy process announces at once). Order between notices
   * does not matter: each only says "read this again".
   */
  #send(notice: Notice): Promise<boolean> {
    const payload = JSON.stringify(notice);
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) {
      this.#log.error('coordination: a notice too long for NOTIFY was not sent', { topic: notice.t, bytes: Buffer.byteLength(payload) });
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      this.#outbox.push({ payload, topic: notice.t, sent: resolve });
      if (this.#outbox.length === 1) setImmediate(() => void this.#flush());
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#outbox.splice(0);
    for (let i = 0; i < batch.length; i += NOTICES_PER_STATEMENT) {
      const part = batch.slice(i, i + NOTICES_PER_STATEMENT);
      try {
        await this.#db.pool.query(`SELECT ${part.map((_, j) => `pg_notify($1, $${j + 2})`).join(', ')}`, [CHANNEL, ...part.map((notice) => notice.payload)]);
        for (const notice of part) notice.sent(true);
      } catch (error) {
        // The changes they announce are stored; the other processes' resync (or next read) covers them.
        this.#log.warn('coordination: notices could not be sent; other processes learn of the changes later', {
          topics: [...new Set(part.map((n) => n.topic))],
          error: String(error),
        });
        for (const notice of part) notice.sent(false);
      }
    }
  }

  async publish(topic: string, key: string): Promise<void> {
    if (this.#closed) return;
    await this.#send({ p: this.processId, t: topic, k: key });
  }

  /**
   * The peers are the sessions listening now (`pg_stat_activity`, by application name): each runs
   * its handlers and answers with an acknowledgement notice. A process that starts listening after
   * the count has nothing stale of this change: it drops its caches when it starts listening.
   */
  async publishAcknowledged(topic: string, key: string, timeoutMs = DEFAULT_ACK_TIMEOUT_MS): Promise<boolean> {
    if (this.#closed) return false;
    // Deaf ourselves, no acknowledgement could reach us: send, and say it was not confirmed.
    if (!this.#client) {
      await this.publish(topic, key);
      return false;
    }
    let peers: string[];
    try {
      const { rows } = await this.#db.pool.query<{ name: string }>(LISTENING_SESSIONS, [`${APPLICATION_PREFIX}%`]);
      peers = rows.map((row) => row.name.slice(APPLICATION_PREFIX.length)).filter((id) => id !== this.processId);
    } catch (error) {
      this.#log.warn('coordination: could not list the other processes; sending without waiting for them', { topic, error: String(error) });
      await this.publish(topic, key);
      return false;
    }
    if (peers.length === 0) {
      await this.publish(topic, key);
      return true;
    }
    const ackId = randomBytes(8).toString('hex');
    const all = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => pending.done(false), timeoutMs);
      const pending = {
        waiting: new Set(peers),
        done: (ok: boolean) => {
          clearTimeout(timer);
          this.#acks.delete(ackId);
          resolve(ok);
        },
      };
      this.#acks.set(ackId, pending);
    });
    if (!(await this.#send({ p: this.processId, t: topic, k: key, a: ackId }))) this.#acks.get(ackId)?.done(false);
    const ok = await all;
    if (!ok)
      this.#log.warn('coordination: not every process acknowledged a notice in time; the silent ones resync when they listen again', {
        topic,
        peers: peers.length,
        timeout_ms: timeoutMs,
      });
    return ok;
  }

  subscribe(topic: string, handler: (key: string) => void): () => void {
    let set = this.#handlers.get(topic);
    if (!set) this.#handlers.set(topic, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }

  onResync(handler: () => void): () => void {
    this.#resyncHandlers.add(handler);
    return () => this.#resyncHandlers.delete(handler);
  }

  async tryLead(name: string): Promise<boolean> {
    const client = this.#client;
    if (!client || this.#closed) return false;
    if (this.#leading.has(name)) return true;
    try {
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [LEAD_LOCK_CLASS, lockKey(name)]);
      if (!rows[0]?.ok || this.#client !== client) return false;
      this.#leading.add(name);
      this.#log.info('coordination: this process now leads', { singleton: name, process_id: this.processId });
      return true;
    } catch (error) {
      this.#log.warn('coordination: could not ask for the leadership', { singleton: name, error: String(error) });
      return false;
    }
  }

  /**
   * A session advisory lock taken on the listening connection with `pg_try_advisory_lock`, asked
   * again every 25 ms: a blocking `pg_advisory_lock` would hold that connection busy (no notices
   * while it waits), and one from the pool would hold a pooled connection that `work` may need.
   */
  async exclusive<T>(name: string, work: () => Promise<T>, waitMs = DEFAULT_EXCLUSIVE_WAIT_MS): Promise<T> {
    const key = lockKey(name);
    const deadline = Date.now() + waitMs;
    let held: pg.Client | null = null;
    while (!held && Date.now() < deadline && !this.#closed) {
      const client = this.#client;
      if (!client) break;
      try {
        const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [EXCLUSIVE_LOCK_CLASS, key]);
        if (rows[0]?.ok) held = client;
      } catch {
        break;
      }
      if (!held) await new Promise((resolve) => setTimeout(resolve, EXCLUSIVE_POLL_MS));
    }
    if (!held) this.#log.warn('coordination: running without the exclusive lock (not had in time, or no listening connection)', { lock: name });
    try {
      return await work();
    } finally {
      // On a connection lost meanwhile the lock went with it; nothing to undo.
      if (held && held === this.#client) await held.query('SELECT pg_advisory_unlock($1, $2)', [EXCLUSIVE_LOCK_CLASS, key]).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#reconnectTimer) clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = null;
    if (this.#countTimer) clearInterval(this.#countTimer);
    this.#countTimer = null;
    for (const pending of this.#acks.values()) pending.done(false);
    const client = this.#client;
    this.#client = null;
    this.#leading.clear();
    await client?.end().catch(() => undefined);
  }
}

/** A leadership's name as the second advisory-lock key (32-bit FNV-1a, signed as PostgreSQL's int4). */
function lockKey(name: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(name)) hash = Math.imul(hash ^ byte, 0x01000193);
  return hash | 0;
}
