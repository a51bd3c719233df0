import { run } from './cli.ts';

await run(process.argv.slice(2), process.env);
