import { run } from './main.ts';

await run();
// Exit as soon as the run is done: idle keep-alive sockets must not hold the job step open.
process.exit();
