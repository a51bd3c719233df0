/** A small structured logger: one JSON object per line on stderr. Never give it a secret. */
export type LogFields = Record<string, unknown>;
export type Logger = {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
};

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
export type LogLevelName = keyof typeof LEVELS;

export function createLogger(level: LogLevelName, write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Logger {
  const threshold = LEVELS[level];
  const emit = (name: Exclude<LogLevelName, 'silent'>) => (message: string, fields?: LogFields) => {
    if (LEVELS[name] < threshold) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: name, msg: message, ...fields }));
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

export const silentLogger: Logger = createLogger('silent');
