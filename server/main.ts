import { loadConfig } from './config.ts';
import { startServer } from './server.ts';

// The entry point: read config, start; stop cleanly on SIGINT / SIGTERM.
const running = await startServer(loadConfig(process.env));
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
