/**
 * `node bench/route-input-cost.ts [--rounds=15] [--requests=3000]`: the CPU time `route()` adds by
 * reading a route's input from its doc (docs/decisions/one-schema-per-route.md), on the route it
 * matters for: `POST /v2/deployments` with the body a create sends. Two bare Hono apps in this
 * process answer the same request with the same stub handler: one registered with `route()` (the
 * body validated from the doc and handed over), one the way every handler read its body before
 * (`readJson(c, DeploymentCreate)` in the handler, registered with `app.on`). The two take turns
 * going first, round by round; CPU time (`process.cpuUsage`), and the ratio of each round's pair.
 */
import { loadavg } from 'node:os';
import { Hono } from 'hono';
import type { AppEnv, RouteContext } from '../server/http/env.ts';
import { OpenApiRegistry } from '../server/http/openapi.ts';
import { route } from '../server/http/route.ts';
import { readJson } from '../server/http/validation.ts';
import { Deployment, DeploymentCreate } from '../shared/schemas/deployment.ts';
import { githubBody } from '../test/helpers/fixtures.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(arg('rounds') ?? 15);
const requests = Number(arg('requests') ?? 3000);

const doc = {
  auth: 'api-key',
  method: 'post',
  path: '/v2/deployments',
  summary: 'Create a deployment',
  tag: 'deployments',
  body: DeploymentCreate,
  response: { status: 201, schema: Deployment },
} as const;
const answer = (body: { name: string }) => ({ name: body.name });

const declared: RouteContext = { app: new Hono<AppEnv>(), docs: new OpenApiRegistry(), services: {} as never };
route(declared, doc, (c, { body }) => c.json(answer(body), 201));

const readInHandler = new Hono<AppEnv>();
readInHandler.on('POST', doc.path, async (c) => c.json(answer(await readJson(c, DeploymentCreate)), 201));

const body = JSON.stringify(githubBody('bench-create', crypto.randomUUID()));
const init = { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, body };

/** CPU microseconds per request answered by `app`. */
async function cpuPerRequest(app: Hono<AppEnv>): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < requests; i++) {
    const response = await app.request(doc.path, init);
    if (response.status !== 201) throw new Error(`${response.status} ${await response.text()}`);
  }
  const used = process.cpuUsage(started);
  return (used.user + used.system) / requests;
}

await cpuPerRequest(declared.app);
await cpuPerRequest(readInHandler);
const ratios: number[] = [];
for (let round = 1; round <= rounds; round++) {
  const order = round % 2 === 0 ? ['route', 'handler'] : ['handler', 'route'];
  const figures: Record<string, number> = {};
  for (const name of order) figures[name] = await cpuPerRequest(name === 'route' ? declared.app : readInHandler);
  ratios.push(figures.route! / figures.handler!);
  console.log(
    `round ${round}: route() ${figures.route!.toFixed(1)} µs, readJson in the handler ${figures.handler!.toFixed(1)} µs, ratio ${ratios.at(-1)!.toFixed(3)}`,
  );
}
const sorted = [...ratios].sort((a, b) => a - b);
const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(3);
console.log(
  `route() ÷ readJson in the handler: median ${at(0.5)} (quartiles ${at(0.25)}–${at(0.75)}), ${rounds} rounds of ${requests}; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
