import type { LogEntry, LogFilter, LogLevel, LogType } from '../../shared/schemas/revision.ts';
import type { Db } from './db.ts';
import { escapeLike } from './dialect.ts';
import { hotQueries } from './queries/hot-paths.ts';
import { SqlStore } from './sql-store.ts';
import type { RevisionLogCap } from './types.ts';

/** A line of a revision's log as writers give it; `timestamp` is when it was printed, when known. */
export type LogLine = { type: LogType; level: LogLevel; message: string; timestamp?: string };

/** Every line of a revision's log goes in by this statement: appends, and the lines written with a revision or a stage change. */
export const INSERT_LOG = 'INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES (?, ?, ?, ?, ?)';
const LAST_LOG_TIMESTAMP = 'SELECT timestamp FROM revision_logs WHERE revision_id = ? AND type = ? ORDER BY seq DESC LIMIT 1';

/** Revisions' build and deploy logs. */
export interface RevisionLogStore {
  /**
   * Appends lines in one transaction. With `cap`, the revision's stored lines and bytes stay within
   * it: lines past it are dropped (and every later one), and one marker line (`cap.marker`) says
   * how many, rewritten as more are dropped. Without, every line is stored (the server's own lines).
   */
  appendLogs(
    revisionId: string,
    /** `timestamp`: when the line was printed (an agent's report); stored times increase strictly per revision and type. */
    entries: LogLine[],
    now: string,
    cap?: RevisionLogCap,
  ): Promise<{ stored: number; dropped: number }>;
  readLogs(revisionId: string, type: LogType, afterSeq: number, limit: number): Promise<{ logs: LogEntry[]; lastSeq: number | null; more: boolean }>;
  /** Log lines with filters and either order, each with its sequence number (the cursor). */
  searchLogs(revisionId: string, filter: LogFilter): Promise<{ logs: Array<LogEntry & { seq: number }>; more: boolean }>;
}

export class SqlRevisionLogStore extends SqlStore implements RevisionLogStore {
  readonly #hot = hotQueries(this.sql.dialect);

  async appendLogs(revisionId: string, entries: LogLine[], now: string, cap?: RevisionLogCap): Promise<{ stored: number; dropped: number }> {
    if (entries.length === 0) return { stored: 0, dropped: 0 };
    if (!cap) {
      await this.sql.tx(async (tx) => {
        const stamp = logStamps(tx, revisionId, now);
        for (const entry of entries) await tx.run(INSERT_LOG, [revisionId, entry.type, entry.level, entry.message, await stamp(entry)]);
      });
      return { stored: entries.length, dropped: 0 };
    }
    return this.sql.tx(async (tx) => {
      const stamp = logStamps(tx, revisionId, now);
      // Locked: appends to one revision from several processes count against one cap.
      const counts = await tx.row<{ log_lines: number; log_bytes: number | string; log_dropped: number; log_marker_seq: number | string | null }>(
        `SELECT log_lines, log_bytes, log_dropped, log_marker_seq FROM revisions WHERE id = ?${tx.dialect.forUpdate}`,
        [revisionId],
      );
      if (!counts) return { stored: 0, dropped: 0 };
      let lines = Number(counts.log_lines);
      let bytes = Number(counts.log_bytes);
      let dropped = Number(counts.log_dropped);
      let firstDropped: (typeof entries)[number] | undefined;
      let stored = 0;
      for (const entry of entries) {
        const size = Buffer.byteLength(entry.message);
        // Once a line was dropped, every later one is too: the log never resumes after its marker.
        if (dropped === 0 && lines + 1 <= cap.maxLines && bytes + size <= cap.maxBytes) {
          await tx.run(INSERT_LOG, [revisionId, entry.type, entry.level, entry.message, await stamp(entry)]);
          lines += 1;
          bytes += size;
          stored += 1;
        } else {
          firstDropped ??= entry;
          dropped += 1;
        }
      }
      const newlyDropped = entries.length - stored;
      let markerSeq = counts.log_marker_seq === null ? null : Number(counts.log_marker_seq);
      if (newlyDropped > 0 && markerSeq === null) {
        const marker = await tx.row<{ seq: number | string }>(`${INSERT_LOG} RETURNING seq`, [
          revisionId,
          firstDropped!.type,
          'warn',
          cap.marker(dropped),
          await stamp({ type: firstDropped!.type }),
        ]);
        markerSeq = Number(marker!.seq);
      } else if (newlyDropped > 0) {
        await tx.run('UPDATE revision_logs SET message = ? WHERE seq = ?', [cap.marker(dropped), markerSeq]);
      }
      await tx.run('UPDATE revisions SET log_lines = ?, log_bytes = ?, log_dropped = ?, log_marker_seq = ? WHERE id = ?', [
        lines,
        bytes,
        dropped,
        markerSeq,
        revisionId,
      ]);
      return { stored, dropped: newlyDropped };
    });
  }

  async readLogs(revisionId: string, type: LogType, afterSeq: number, limit: number): Promise<{ logs: LogEntry[]; lastSeq: number | null; more: boolean }> {
    const rows = await this.sql.rows<{ seq: number; timestamp: string; level: LogLevel; message: string }>(this.#hot.readLogs, [
      revisionId,
      type,
      afterSeq,
      limit + 1,
    ]);
    const page = rows.slice(0, limit);
    return {
      logs: page.map(({ timestamp, level, message }) => ({ timestamp, level, message })),
      lastSeq: page.at(-1)?.seq ?? null,
      more: rows.length > limit,
    };
  }

  async searchLogs(revisionId: string, filter: LogFilter): Promise<{ logs: Array<LogEntry & { seq: number }>; more: boolean }> {
    const where = ['revision_id = @revision_id', 'type = @type'];
    if (filter.cursor > 0) where.push(filter.order === 'asc' ? 'seq > @cursor' : 'seq < @cursor');
    if (filter.level) where.push('level = @level');
    if (filter.query) where.push(`message ${this.sql.dialect.likeIgnoringCase} @query ESCAPE '\\'`);
    if (filter.startTime) where.push('timestamp >= @start_time');
    if (filter.endTime) where.push('timestamp <= @end_time');
    const rows = await this.sql.rows<LogEntry & { seq: number }>(
      `SELECT seq, timestamp, level, message FROM revision_logs WHERE ${where.join(' AND ')}
       ORDER BY seq ${filter.order === 'asc' ? 'ASC' : 'DESC'} LIMIT @limit`,
      {
        revision_id: revisionId,
        type: filter.type,
        cursor: filter.cursor,
        level: filter.level ?? null,
        query: filter.query ? `%${escapeLike(filter.query)}%` : null,
        start_time: filter.startTime ?? null,
        end_time: filter.endTime ?? null,
        limit: filter.limit + 1,
      },
    );
    return { logs: rows.slice(0, filter.limit), more: rows.length > filter.limit };
  }
}

/**
 * The timestamps a revision's new log lines are stored with: a line's own (when it was printed, as
 * an agent reports it) or else `now`, never later than `now` (an agent's clock may run ahead), and
 * strictly after the revision's previous line of the same type, so lines printed in one
 * millisecond, or sent in one batch, still have distinct, increasing times: a client that follows a
 * log by `start_time` (`langgraph deploy logs -f`) then always moves on (docs/decisions/log-timestamps.md).
 */
function logStamps(tx: Db, revisionId: string, now: string): (entry: { type: LogType; timestamp?: string }) => Promise<string> {
  const nowMs = Date.parse(now);
  const previous = new Map<LogType, number>();
  return async ({ type, timestamp }) => {
    if (!previous.has(type)) {
      const last = await tx.row<{ timestamp: string }>(LAST_LOG_TIMESTAMP, [revisionId, type]);
      previous.set(type, last ? Date.parse(last.timestamp) : Number.NEGATIVE_INFINITY);
    }
    const reported = timestamp === undefined ? Number.NaN : Date.parse(timestamp);
    const ms = Math.max(Number.isNaN(reported) ? nowMs : Math.min(reported, nowMs), previous.get(type)! + 1);
    previous.set(type, ms);
    return new Date(ms).toISOString();
  };
}
