import { inProcessApp } from '../test/helpers/in-process.ts';

/**
 * `node bench/openapi-document.ts`: what `GET /openapi.json` costs. The document is built from the
 * zod schemas on the first request and kept; this prints the first request (build + serialise),
 * the median of later ones, and the size, for a fresh app each round. Not part of `npm test`.
 */
const rounds = 5;
const later = 50;
const firsts: number[] = [];
const again: number[] = [];
let bytes = 0;
for (let round = 0; round < rounds; round++) {
  const t = await inProcessApp();
  let started = performance.now();
  const text = await (await t.app.request('/openapi.json')).text();
  firsts.push(performance.now() - started);
  bytes = text.length;
  for (let i = 0; i < later; i++) {
    started = performance.now();
    await (await t.app.request('/openapi.json')).text();
    again.push(performance.now() - started);
  }
  t.close();
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const doc = JSON.parse(await (await (await inProcessApp()).app.request('/openapi.json')).text());
const operations = Object.values(doc.paths as Record<string, object>).reduce((n, ops) => n + Object.keys(ops).length, 0);
process.stdout.write(
  `openapi.json: ${operations} operations, ${Object.keys(doc.components.schemas ?? {}).length} component schemas, ${(bytes / 1024).toFixed(0)} KiB\n` +
    `first request (builds the document): median ${median(firsts).toFixed(1)} ms over ${rounds} fresh apps (min ${Math.min(...firsts).toFixed(1)}, max ${Math.max(...firsts).toFixed(1)})\n` +
    `later requests (cached): median ${median(again).toFixed(2)} ms over ${rounds * later}\n`,
);
process.exit(0);
