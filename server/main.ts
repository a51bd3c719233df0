import { loadConfig } from './config.ts';
import { releaseStartGarbageAfter } from './lib/start-garbage.ts';
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
// A second after listening, once the first requests a starting process gets are usually answered.
const releasing = releaseStartGarbageAfter(1000);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    clearTimeout(releasing);
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
