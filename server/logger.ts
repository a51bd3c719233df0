import pino from 'pino';
import { requestScope } from './lib/request-scope.ts';

/** A small structured logger: one JSON object per line on stderr. Never give it a secret. */
export type LogFields = Record<string, unknown>;
export type Logger = {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
};

export type LogLevelName = 'debug' | 'info' | 'warn' | 'error' | 'silent';

/**
 * Field names whose values are never written, whatever a caller passes by mistake: keys, tokens,
 * secrets and passwords, at the top of a line's fields or one level down. A second line of
 * defence: callers log ids, never these values.
 */
const REDACTED = ['key', 'api_key', 'token', 'secret', 'password', 'authorization', 'client_secret', 'value'].flatMap((name) => [name, `*.${name}`]);

/**
 * One JSON object per line (pino): `time` (RFC 3339), `level` (its name), `msg`, the fields, and
 * `request_id` for every line written while a request is served (the request scope carries it
 * through awaits). `write` receives each line without its newline (tests); stderr by default.
 */
export function createLogger(level: LogLevelName, write?: (line: string) => void): Logger {
  const destination = write ? { write: (line: string) => write(line.endsWith('\n') ? line.slice(0, -1) : line) } : pino.destination({ fd: 2, sync: true });
  const base = pino(
    {
      level,
      base: undefined,
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACTED, censor: '[redacted]' },
      mixin: () => {
        const requestId = requestScope()?.requestId;
        return requestId === undefined ? {} : { request_id: requestId };
      },
    },
    destination,
  );
  // The message goes in first, so a line reads `…,"msg":"…",<its fields>` as it always has. The
  // level is fixed for the logger's life: a level below it costs nothing, not even the merged
  // fields (the request log's `debug` line is asked for on every request).
  return {
    debug: base.isLevelEnabled('debug') ? (message, fields) => base.debug({ msg: message, ...fields }) : () => {},
    info: (message, fields) => base.info({ msg: message, ...fields }),
    warn: (message, fields) => base.warn({ msg: message, ...fields }),
    error: (message, fields) => base.error({ msg: message, ...fields }),
  };
}

export const silentLogger: Logger = createLogger('silent');
