import { loadConfig } from './config.ts';
import { startServer } from './server.ts';
import { StartupError } from './startup-errors.ts';

// The entry point: read config, start; stop cleanly on SIGINT / SIGTERM. A configuration or
// database path that cannot work ends the process with its one-sentence reason, not a stack.
let running: Awaited<ReturnType<typeof startServer>> | undefined;
let stopping = false;
// Listened for before the start: without a listener, a signal that came after the "listening" line
// but before these were added killed the process at once (the kernel's default), skipping the clean
// stop and Node's exit, which writes the compile cache (server/bundle-entry.ts). A signal during the
// start still ends the process at once, with the shell's code for it, rather than wait for a start
// that may hang (a database that does not answer).
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    if (!running) process.exit(code);
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
try {
  running = await startServer(loadConfig(process.env));
} catch (error) {
  if (!(error instanceof StartupError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
