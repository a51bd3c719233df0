import { runProxyProcess } from './proxy-process.ts';

await runProxyProcess(process.argv.slice(2));
