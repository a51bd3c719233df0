import { stripVTControlCharacters } from 'node:util';

export type LogLevel = 'info' | 'warn' | 'error';
export type ServerLine = { level: LogLevel; message: string };

/** A log line as stored: no colour or other terminal control codes, no trailing blanks. */
export function plainText(line: string): string {
  return stripVTControlCharacters(line).replace(/\s+$/, '');
}

/**
 * One line of an agent server's output, with the level the server printed: the LangGraph.js API
 * server writes JSON lines (`{"level", "event", …}`, with `LOG_JSON=true`); anything else (Node's
 * own crash report, a graph's `console.log`) is `error` when it names an error, else `info` on
 * stdout and `warn` on stderr. Null for a blank line.
 */
export function parseServerLine(raw: string, stream: 'stdout' | 'stderr'): ServerLine | null {
  const text = plainText(raw);
  if (text.trim() === '') return null;
  if (text.startsWith('{')) {
    try {
      const entry = JSON.parse(text) as { level?: unknown; event?: unknown; message?: unknown };
      const event = typeof entry.event === 'string' ? entry.event : typeof entry.message === 'string' ? entry.message : null;
      if (event !== null) return { level: levelOf(entry.level), message: plainText(event) };
    } catch {
      // not JSON after all: kept as printed
    }
  }
  if (ERROR_LINE.test(text)) return { level: 'error', message: text };
  return { level: stream === 'stdout' ? 'info' : 'warn', message: text };
}

function levelOf(level: unknown): LogLevel {
  const name = typeof level === 'string' ? level.toLowerCase() : '';
  if (name === 'error' || name === 'fatal' || name === 'critical') return 'error';
  if (name === 'warn' || name === 'warning') return 'warn';
  return 'info';
}

/** `SyntaxError: …`, `Error [ERR_MODULE_NOT_FOUND]: …`, `ModuleNotFoundError: …`: the line that names an error. */
const ERROR_LINE = /^\s*(Uncaught )?([A-Z]\w*)?(Error|Exception)\b( \[[A-Z_]+\])?:/;

/**
 * The line that says what went wrong, from a server's last lines: the first that names an error
 * (its message's first line: a JSON event's stack has the message first), never a stack frame.
 */
export function firstErrorLine(lines: ServerLine[]): string | null {
  for (const line of lines) {
    const first = line.message.split('\n').find((part) => ERROR_LINE.test(part));
    if (first) return first.trim();
  }
  const error = lines.find((line) => line.level === 'error');
  return error ? (error.message.split('\n')[0] ?? '').trim() : null;
}
