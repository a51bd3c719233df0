import { loadConfig } from './config.ts';
import { startServer } from './server.ts';
import { StartupError } from './startup-errors.ts';

// The entry point: read config, start; stop cleanly on SIGINT / SIGTERM. A configuration or
// database path that cannot work ends the process with its one-sentence reason, not a stack.
let running: Awaited<ReturnType<typeof startServer>>;
try {
  running = await startServer(loadConfig(process.env));
} catch (error) {
  if (!(error instanceof StartupError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
