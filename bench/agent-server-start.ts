/**
 * The agent server's start alone, as the agent starts it (the same sandbox: bwrap, pasta, cgroup
 * limits, sandbox user), on a checkout a run of bench/agent-push-to-serving.ts left built: wall
 * time and the CPU of the server's process group from spawn to healthy (GET /ok), then a first
 * and a second POST /runs/wait. ROOT names the tree whose agent code starts it, so two trees can be
 * alternated on one checkout (the CPU time is the steadier figure on a shared machine).
 *
 *   ROOT=/path/to/tree N=1 npm exec -c 'node bench/agent-server-start.ts <work dir of a push bench>'
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = process.env.ROOT ?? new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const { findBwrap } = await import(`${ROOT}/agent/sandbox.ts`);
const { findPasta } = await import(`${ROOT}/agent/sandbox-network.ts`);
const { sandboxUser } = await import(`${ROOT}/agent/sandbox-user.ts`);
const { findCgroups } = await import(`${ROOT}/agent/cgroups.ts`);
const { LiveServers } = await import(`${ROOT}/agent/live-servers.ts`);
const { SandboxSetup } = await import(`${ROOT}/agent/sandbox-setup.ts`);
const workDir = process.argv[2]!;
const egress = (process.env.EGRESS ?? 'public') as 'public' | 'none';
const noLimits = process.env.LIMITS === 'none';
const options = {
  workDir,
  sandbox: process.env.SANDBOX ?? 'bwrap',
  bwrapPath: findBwrap(),
  sandboxUser: sandboxUser(undefined),
  egress: { mode: egress, allow: [] },
  pastaPath: findPasta(),
  limits: noLimits
    ? null
    : { cgroups: findCgroups(), memoryMb: 1024, buildMemoryMb: 4096, pidsMax: 512, cpus: 1, tmpMb: 256, diskMb: 2048, buildTimeoutSeconds: 600 },
  env: process.env,
  passEnv: [],
  cacheDir: '/tmp/cp-agent-test-package-cache',
  startTimeoutMs: 60000,
  print: console.log,
  runtimeLogs: {},
};
const setup = new SandboxSetup(options);
const servers = new LiveServers({ options, setup, client: {} as any, proxy: {} as any, stopping: new AbortController().signal, publicUrl: () => '' });
const dep = readdirSync(workDir).find((d: string) => /^[0-9a-f-]{36}$/.test(d))!;
const rev = readdirSync(join(workDir, dep)).find((d: string) => /^[0-9a-f-]{36}$/.test(d) && existsSync(join(workDir, dep, `${d}.agent/built.json`)))!;
const buildDir = join(workDir, dep, rev);
const _t0 = performance.now();
const rounds = Number(process.env.N ?? 3);
// CPU_PROF=1: the server writes a --cpu-prof of its start into the deployment's state folder (the
// one folder of its own it may write), through NODE_OPTIONS given as a secret (what reaches its environment).
// SERVER_NODE_OPTIONS: more of Node's options for the server (a flag tried before the agent sets it).
const nodeOptions = [...(process.env.CPU_PROF ? ['--cpu-prof --cpu-prof-dir=.langgraph_api'] : []), process.env.SERVER_NODE_OPTIONS ?? ''].join(' ').trim();
const secrets = nodeOptions ? [{ name: 'NODE_OPTIONS', value: nodeOptions }] : [];
for (let i = 0; i < rounds; i++) {
  const start = performance.now();
  const stamps: string[] = [];
  const server = await servers.startServer(
    dep,
    buildDir,
    { id: rev, graph_config_path: null, secrets, resource_spec: null } as any,
    (line: any) => stamps.push(`${(performance.now() - start).toFixed(0)} ${line.message.slice(0, 60)}`),
    new AbortController().signal,
  );
  const healthy = performance.now() - start;
  const cpu = groupCpuMs(server.pid);
  const { request } = await import('node:http');
  const ask = (method: string, path: string, body?: unknown) =>
    new Promise<number>((res, rej) => {
      const s = performance.now();
      const req = request(
        {
          socketPath: (server.upstream as any).socketPath,
          port: (server.upstream as any).port,
          host: '127.0.0.1',
          path,
          method,
          headers: { 'content-type': 'application/json' },
        },
        (r) => {
          r.resume();
          r.on('end', () => res(performance.now() - s));
        },
      );
      req.on('error', rej);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  // WARM="POST /assistants/search {}; GET /info": requests made before the first run (their CPU apart).
  for (const step of (process.env.WARM ?? '').split(';').filter((x) => x.trim())) {
    const [method, path, ...body] = step.trim().split(' ');
    await ask(method!, path!, body.length ? JSON.parse(body.join(' ')) : undefined);
  }
  const warmed = groupCpuMs(server.pid);
  const runOnce = () => ask('POST', '/runs/wait', { assistant_id: 'agent', input: {} });
  const first = await runOnce();
  const afterFirst = groupCpuMs(server.pid);
  const second = await runOnce();
  const afterSecond = groupCpuMs(server.pid);
  console.log(
    JSON.stringify({
      cpu_ms: cpu,
      healthy: Math.round(healthy),
      warm_cpu_ms: warmed - cpu,
      first_run: Math.round(first),
      first_run_cpu_ms: afterFirst - warmed,
      second_run: Math.round(second),
      second_run_cpu_ms: afterSecond - afterFirst,
    }),
  );
  if (process.env.VERBOSE) console.log(stamps.join('\n'));
  await server.stop();
}
process.exit(0);

/** CPU time (user + system) of the processes in the group of `pid` (the sandbox, its relay and the server) that are still running. */
function groupCpuMs(pid: number): number {
  let ticks = 0;
  for (const entry of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ');
      if (Number(fields[2]) === pid) ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  return ticks * 10;
}
