import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { Source, SourceRevisionConfig } from './deployment.ts';
import { lazySchema } from './lazy.ts';

/** Every status, in the order of a revision's life. */
const REVISION_STATUSES = [
  'CREATING',
  'QUEUED',
  'AWAITING_BUILD',
  'BUILDING',
  'AWAITING_DEPLOY',
  'DEPLOYING',
  'DEPLOYED',
  'CREATE_FAILED',
  'BUILD_FAILED',
  'DEPLOY_FAILED',
  'SKIPPED',
  'INTERRUPTED',
  'UNKNOWN',
] as const;
export const RevisionStatus = lazySchema(() => z.enum(REVISION_STATUSES));
export type RevisionStatus = z.infer<typeof RevisionStatus>;

/** Statuses a revision never leaves. */
export const TERMINAL_REVISION_STATUSES: ReadonlySet<RevisionStatus> = new Set<RevisionStatus>([
  'DEPLOYED',
  'CREATE_FAILED',
  'BUILD_FAILED',
  'DEPLOY_FAILED',
  'SKIPPED',
  'INTERRUPTED',
]);

/** Terminal statuses that mean the revision did not go live. */
export const FAILED_REVISION_STATUSES: ReadonlySet<RevisionStatus> = new Set([...TERMINAL_REVISION_STATUSES].filter((status) => status !== 'DEPLOYED'));

/** Statuses of a revision that has not ended, queued or in progress. */
export const UNFINISHED_REVISION_STATUSES: readonly RevisionStatus[] = REVISION_STATUSES.filter((status) => !TERMINAL_REVISION_STATUSES.has(status));

/** Statuses in which a revision holds its deployment's one in-progress slot. */
export const IN_PROGRESS_REVISION_STATUSES: readonly RevisionStatus[] = UNFINISHED_REVISION_STATUSES.filter((status) => status !== 'QUEUED');

export function isTerminal(status: RevisionStatus): boolean {
  return TERMINAL_REVISION_STATUSES.has(status);
}

export const RevisionTrigger = lazySchema(() => z.enum(['create', 'patch', 'push', 'redeploy']));
export type RevisionTrigger = z.infer<typeof RevisionTrigger>;

export const Revision = lazySchema(() =>
  z.object({
    id: Uuid,
    deployment_id: Uuid,
    created_at: Timestamp,
    updated_at: Timestamp,
    status: RevisionStatus,
    status_message: z.string().nullable(),
    source: Source,
    source_revision_config: SourceRevisionConfig,
    trigger: RevisionTrigger,
  }),
);
export type Revision = z.infer<typeof Revision>;

export const RevisionListQuery = lazySchema(() =>
  z.object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    offset: z.coerce.number().int().min(0).default(0),
    status: z
      .string()
      .transform((value) => value.split(',').filter((s) => s.length > 0))
      .pipe(z.array(RevisionStatus))
      .optional(),
  }),
);
export type RevisionListQuery = z.infer<typeof RevisionListQuery>;

export const LogType = lazySchema(() => z.enum(['build', 'deploy']));
export type LogType = z.infer<typeof LogType>;

export const LogLevel = lazySchema(() => z.enum(['debug', 'info', 'warn', 'error']));
export type LogLevel = z.infer<typeof LogLevel>;

export const LogEntry = lazySchema(() => z.object({ timestamp: Timestamp, level: LogLevel, message: z.string() }));
export type LogEntry = z.infer<typeof LogEntry>;

export const RevisionLogsQuery = lazySchema(() =>
  z.object({
    type: LogType.default('build'),
    limit: z.coerce.number().int().min(1).max(1000).default(50),
    offset: z.coerce.number().int().min(0).default(0),
  }),
);
export type RevisionLogsQuery = z.infer<typeof RevisionLogsQuery>;

/** `next_offset` is an opaque cursor: pass it back as `offset` to read the lines stored after this page (never null: this route reads oldest first). */
export const RevisionLogs = lazySchema(() => z.object({ logs: z.array(LogEntry), next_offset: z.int().nullable() }));
export type RevisionLogs = z.infer<typeof RevisionLogs>;

/**
 * The body of the log routes `langgraph deploy logs` calls (`POST /v1/projects/{id}/…_logs`); all
 * optional. `offset` is the cursor a previous answer gave as `next_offset`; `query` matches a
 * substring of the message; `level` the level (`warning` reads as `warn`).
 */
export const ProjectLogsRequest = lazySchema(() =>
  z.strictObject({
    limit: z.int().min(1).max(1000).nullish(),
    order: z.enum(['asc', 'desc']).nullish(),
    offset: z.union([z.int().min(0), z.string().regex(/^\d{1,15}$/, { message: 'offset must be a cursor from next_offset' })]).nullish(),
    level: z
      .string()
      .transform((value) => value.toLowerCase())
      .pipe(z.enum(['debug', 'info', 'warn', 'warning', 'error']))
      .nullish(),
    query: z.string().max(1000).nullish(),
    start_time: z.iso.datetime({ offset: true }).nullish(),
    end_time: z.iso.datetime({ offset: true }).nullish(),
  }),
);
export type ProjectLogsRequest = z.infer<typeof ProjectLogsRequest>;

/** A log line as the project log routes answer it: with an `id` (its cursor). */
export const ProjectLogEntry = lazySchema(() => z.object({ id: z.string(), timestamp: Timestamp, level: LogLevel, message: z.string() }));
export const ProjectLogs = lazySchema(() => z.object({ logs: z.array(ProjectLogEntry), next_offset: z.int().nullable() }));
export type ProjectLogs = z.infer<typeof ProjectLogs>;

/** What the store filters log lines by. */
export type LogFilter = {
  type: LogType;
  order: 'asc' | 'desc';
  /** Lines after (asc) or before (desc) this cursor; 0 = from the start (asc) or the newest (desc). */
  cursor: number;
  limit: number;
  level?: LogLevel | undefined;
  query?: string | undefined;
  startTime?: string | undefined;
  endTime?: string | undefined;
};
