import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { withInstallSlot } from '../helpers/install-slots.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, killLeftoverServers, LINK_AGENT_MODULES, localListener, runGraph, SETTLED, startAgent } from './harness.ts';

type Probe = { found: string[]; reached: string[]; wrote: string[]; env: string[] };
type NetProbe = { connected: string[]; kernel: string[]; marker: string };

/** A listener the attacker must not reach: on 127.0.0.1 (a port) or an abstract unix socket (a name starting with NUL). */
async function canary(where: number | string): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => {
    // The probe hangs up at once: a write into a closed socket is no failure of the canary.
    socket.on('error', () => undefined);
    socket.end('canary\n');
  });
  await new Promise<void>((resolve) => (typeof where === 'number' ? server.listen(where, '127.0.0.1', resolve) : server.listen(where, resolve)));
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : 0 };
}

const OPERATOR_TOKEN = `operator-registry-token-${crypto.randomUUID()}`;

/**
 * The attack on a shared machine, for real: one control-plane server process, two workspaces each
 * with its own `local` agent process and work directory, a victim deployment serving with its
 * secret, and a hostile repository whose install script and graph search `/proc`, the victim's
 * files, the agents' records and tokens, the control plane's database, key and data folder, the
 * machine's home, and try to write into the victim's deployment. Everything real: bwrap, npm ci,
 * the LangGraph.js API server, git over file://.
 */
describe('a hostile repository next to another workspace on one machine', () => {
  const servers: ServerProcess[] = [];
  const agents: AgentProcess[] = [];
  const workDirs: string[] = [];
  const canaries: Server[] = [];
  // The control plane and the victim, sandboxed and serving, are the same for both attackers: made once.
  let server: ServerProcess;
  let owner: Api;
  let victimWs: string;
  let victimApi: Api;
  let victimWork: string;
  let victimSecret: string;
  let victimListener: { listenerId: string; token: string };
  let victimAgent: AgentProcess;
  let victimId: string;
  let victimRevision: { id: string };
  let victimHost: string;
  let victimCheckout: string;
  let victimGraph: string;

  beforeAll(async () => {
    victimWork = mkdtempSync(join(tmpdir(), 'cp-victim-work-'));
    workDirs.push(victimWork);
    server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', RECONCILE_INTERVAL_MS: '0' });
    servers.push(server);
    owner = apiClient(server.url, server.apiKey);
    const victimWsCreated = await owner.post('/v1/workspaces', { name: `victim-${crypto.randomUUID().slice(0, 6)}` });
    expect(victimWsCreated.status).toBe(201);
    victimWs = victimWsCreated.body.id as string;
    victimApi = apiClient(server.url, server.apiKey, { 'x-tenant-id': victimWs });

    // The victim: the fixture app with its secret, served by its own workspace's sandboxed agent.
    victimSecret = `victim-secret-${crypto.randomUUID()}`;
    victimListener = await localListener(victimApi, victimWs);
    victimAgent = await startAgent({
      url: server.url,
      token: victimListener.token,
      listenerId: victimListener.listenerId,
      workDir: victimWork,
      env: { OPERATOR_REGISTRY_TOKEN: OPERATOR_TOKEN },
      args: ['--sandbox', 'bwrap'],
    });
    agents.push(victimAgent);
    const victimFx = await workspaceFixtures(victimApi);
    const victim = await victimApi.post(
      '/v2/deployments',
      githubBody(uniqueName('victim'), victimFx.integrationId, {
        // The victim's packages are the agent's own, linked: only the attacker's install is under test.
        source_config: {
          integration_id: victimFx.integrationId,
          repo_url: graphRepo().url,
          deployment_type: 'dev',
          build_on_push: false,
          install_command: LINK_AGENT_MODULES,
        },
        secrets: [{ name: 'GREETING', value: victimSecret }],
      }),
    );
    expect(victim.status).toBe(201);
    victimId = victim.body.id as string;
    const settled = await revisionReaches(victimApi, victimId, victim.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(settled.status, `${settled.status_message}\n${victimAgent.output()}`).toBe('DEPLOYED');
    victimRevision = settled;
    victimHost = (await victimApi.get(`/v2/deployments/${victimId}`)).body.source_config.custom_url;
    victimCheckout = join(victimWork, victimId, victimRevision.id);
    victimGraph = readFileSync(join(victimCheckout, 'src/graph.mjs'), 'utf8');
  }, 600_000);

  afterAll(async () => {
    for (const agent of agents) await agent.stop('SIGTERM');
    for (const server of servers) await server.kill('SIGTERM');
    for (const dir of workDirs) killLeftoverServers(dir);
    for (const server of canaries) server.close();
  });

  // With the sandbox nothing is found; with `--sandbox none` the same probes find every target of
  // the network and the kernel (so they are proven able to find them).
  it.each(['bwrap', 'none'] as const)(
    'with --sandbox %s: sandboxed, finds nothing of the other workspace, the agents, the control plane, the network or the kernel and writes nothing outside its checkout; unsandboxed, its network and kernel probes find every target',
    {
      timeout: 600_000,
    },
    async (sandbox) => {
      const sandboxed = sandbox === 'bwrap';
      const args = ['--sandbox', sandbox];
      const attackerWork = mkdtempSync(join(tmpdir(), 'cp-attacker-work-'));
      workDirs.push(attackerWork);
      const attackerWs = (await owner.get('/v1/workspaces')).body.find((ws: { id: string }) => ws.id !== victimWs).id as string;
      const attackerApi = apiClient(server.url, server.apiKey, { 'x-tenant-id': attackerWs });

      // The attacker: its own workspace, its own agent (started with an extra inherited descriptor).
      const attackerListener = await localListener(attackerApi, attackerWs);
      const attackerAgent = await startAgent({
        url: server.url,
        token: attackerListener.token,
        listenerId: attackerListener.listenerId,
        workDir: attackerWork,
        env: { OPERATOR_REGISTRY_TOKEN: OPERATOR_TOKEN },
        inheritedFd: true,
        cacheDir: mkdtempSync(join(tmpdir(), 'cp-attacker-cache-')),
        args,
      });
      agents.push(attackerAgent);
      const attackerFx = await workspaceFixtures(attackerApi);
      const attackerSecret = `attacker-own-secret-${crypto.randomUUID()}`;
      const hostileRepo = graphRepo();
      const dataDir = dirname(server.databasePath);
      // Whatever an earlier (failed) run left in the home folder must not pass for this run's write.
      rmSync(join(homedir(), 'planted-by-hostile'), { force: true });
      const keyFile = `${server.databasePath}.key`;

      const attackerName = uniqueName('hostile');
      const needles: Record<string, string> = {
        'the victim secret': victimSecret,
        "the victim agent's token": victimListener.token,
        "the attacker agent's own token": attackerListener.token,
        'the bootstrap API key': server.apiKey,
        "the operator's registry token": OPERATOR_TOKEN,
      };
      if (existsSync(keyFile)) needles['the control plane key'] = readFileSync(keyFile, 'utf8').trim();
      const manifest = JSON.parse(hostileRepo.read('package.json')) as Record<string, unknown>;
      manifest.scripts = { postinstall: 'node install-probe.mjs' };
      // The network's targets: the control plane, the victim's proxy and server (its port, or its
      // socket), a canary on 127.0.0.1 and a canary abstract socket, all on this machine's loopback.
      const tcpCanary = await canary(0);
      const abstractName = `\0cp-canary-${crypto.randomUUID()}`;
      const abstractCanary = await canary(abstractName);
      canaries.push(tcpCanary.server, abstractCanary.server);
      const victimServer = JSON.parse(readFileSync(join(`${victimCheckout}.agent`, 'server.json'), 'utf8')) as { port?: number; socketPath?: string };
      const network = {
        tcp: [
          { label: 'the control plane', port: Number(new URL(server.url).port) },
          { label: "the victim's proxy", port: victimAgent.proxyPort },
          { label: 'the canary on 127.0.0.1', port: tcpCanary.port },
          ...(victimServer.port ? [{ label: "the victim's server", port: victimServer.port }] : []),
        ],
        unix: [
          { label: 'the canary abstract socket', path: abstractName },
          ...(victimServer.socketPath ? [{ label: "the victim's server", path: victimServer.socketPath }] : []),
        ],
      };
      // The folders the file search walks: sandboxed, everywhere secrets are left (the probe's own
      // list); unsandboxed, where it finds nothing is asserted, only the victim's and the control
      // plane's folders (walking the whole machine's /tmp and /work took minutes).
      const walk = sandboxed ? undefined : [victimWork, dataDir];
      // ownCheckout null: the probe takes the folder it runs in (its checkout) and the agent's records beside it.
      const targets = {
        network,
        needles,
        walk,
        ownCheckout: null,
        unreachable: [
          server.databasePath,
          keyFile,
          dataDir,
          victimWork,
          victimCheckout,
          join(victimCheckout, 'src/graph.mjs'),
          `${victimCheckout}.agent`,
          join(victimWork, victimId, 'state'),
          attackerWork,
          homedir(),
          ROOT,
          '/work',
        ],
        // Unsandboxed the writes would succeed (that is what --sandbox none means) and spoil the victim the cases share.
        writes: sandboxed
          ? [
              join(victimCheckout, 'src/graph.mjs'),
              join(victimWork, victimId, 'state', 'planted.json'),
              join(dataDir, 'planted'),
              join(homedir(), 'planted-by-hostile'),
            ]
          : [],
      };
      hostileRepo.commit(
        {
          'targets.json': JSON.stringify(targets),
          'probe.mjs': readFileSync(join(ROOT, 'test/fixtures/hostile/probe.mjs'), 'utf8'),
          'install-probe.mjs': readFileSync(join(ROOT, 'test/fixtures/hostile/install-probe.mjs'), 'utf8'),
          'net-probe.mjs': readFileSync(join(ROOT, 'test/fixtures/hostile/net-probe.mjs'), 'utf8'),
          'src/graph.mjs': readFileSync(join(ROOT, 'test/fixtures/hostile/graph.mjs'), 'utf8'),
          'package.json': JSON.stringify(manifest, null, 2),
        },
        'A hostile install script and graph',
      );
      // The build command lists the descriptors the sandbox got (0-2, and 3 for the listing itself).
      // Sandboxed, the install script runs as the attack ran it: npm ci's postinstall. Unsandboxed
      // (the control: do the probes find their targets?) the install stage runs it directly on the
      // agent's own packages, linked: a second npm ci from the registry proved nothing more and
      // was half of this case's time.
      const deploy = async () => {
        const created = await attackerApi.post(
          '/v2/deployments',
          githubBody(attackerName, attackerFx.integrationId, {
            source_config: {
              integration_id: attackerFx.integrationId,
              repo_url: hostileRepo.url,
              deployment_type: 'dev',
              build_on_push: false,
              build_command: 'ls /proc/self/fd | tr "\\n" " " | sed "s/^/FDS /"',
              ...(sandboxed ? {} : { install_command: `ln -s ${join(ROOT, 'node_modules')} node_modules && node install-probe.mjs` }),
            },
            secrets: [{ name: 'GREETING', value: attackerSecret }],
          }),
        );
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        return { created, hostile: await revisionReaches(attackerApi, created.body.id, created.body.latest_revision_id, SETTLED, 300_000) };
      };
      // An npm ci downloads from the registry: one of the machine's install slots while it builds.
      const { created, hostile } = sandboxed ? await withInstallSlot(deploy) : await deploy();
      const buildLog = (
        (await attackerApi.get(`/v2/deployments/${created.body.id}/revisions/${hostile.id}/logs?type=build&limit=1000`)).body.logs as Array<{ message: string }>
      ).map((l) => l.message);
      expect(hostile.status, `${hostile.status_message}\n${buildLog.join('\n')}\n${attackerAgent.output()}`).toBe('DEPLOYED');

      // The network and the kernel, from the install script and from the graph.
      const everything = ['the control plane', "the victim's proxy", 'the canary on 127.0.0.1', "the victim's server", 'the canary abstract socket'];
      const installNet = JSON.parse(buildLog.find((line) => line.startsWith('NETPROBE '))?.slice('NETPROBE '.length) ?? 'null') as NetProbe | null;
      expect(installNet, buildLog.join('\n')).not.toBeNull();
      const attackerDeployment = (await attackerApi.get(`/v2/deployments/${created.body.id}`)).body;
      const answer = await runGraph(attackerAgent.proxyPort, attackerDeployment.source_config.custom_url);
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      const servedNet = answer.body.network as NetProbe;
      for (const found of [installNet!, servedNet]) {
        const hostUid = statSync(found.marker).uid;
        if (sandboxed) {
          expect(found.connected).toEqual([]);
          expect(found.kernel).toEqual([]);
          // The sandbox's user as the host sees it (this test runs as root, as the agent may).
          if (process.getuid?.() === 0) expect(hostUid).not.toBe(0);
        } else {
          expect([...found.connected].sort()).toEqual([...everything].sort());
          if (process.getuid?.() === 0) {
            expect(found.kernel).toContain('/proc/sys/kernel/printk_ratelimit');
            expect(hostUid).toBe(0);
          }
        }
      }
      // Unsandboxed, the file search finds what it looks for too: that is what --sandbox none means.
      if (!sandboxed) return;

      // The install script's search: nothing found, nothing reached, nothing written, no secret.
      const installLine = buildLog.find((line) => line.startsWith('PROBE '));
      expect(installLine, buildLog.join('\n')).toBeDefined();
      const install = JSON.parse(installLine!.slice('PROBE '.length)) as Probe;
      expect(install.found).toEqual([]);
      expect(install.reached).toEqual([]);
      expect(install.wrote).toEqual([]);
      expect(install.env).not.toContain('GREETING');
      expect(install.env).not.toContain('OPERATOR_REGISTRY_TOKEN');
      expect(install.env).not.toContain('CONTROL_PLANE_AGENT_TOKEN');
      // No descriptor of the agent (the inherited one is 3 in the agent) reached the build command.
      const fds = buildLog.find((line) => line.startsWith('FDS '));
      expect(fds?.trim()).toBe('FDS 0 1 2 3');

      // The graph's search, run by the agent server: the same, and its own secret visible to it.
      const served = answer.body.probe as Probe;
      expect(served.found).toEqual([]);
      expect(served.reached).toEqual([]);
      expect(served.wrote).toEqual([]);
      expect(answer.body.secret_seen).toBe(attackerSecret);
      expect(served.env).not.toContain('OPERATOR_REGISTRY_TOKEN');

      // The victim is untouched: its files, and its answer with its own secret.
      expect(readFileSync(join(victimCheckout, 'src/graph.mjs'), 'utf8')).toBe(victimGraph);
      expect(existsSync(join(victimWork, victimId, 'state', 'planted.json'))).toBe(false);
      expect(existsSync(join(dataDir, 'planted'))).toBe(false);
      expect(existsSync(join(homedir(), 'planted-by-hostile'))).toBe(false);
      const victimAnswer = await runGraph(victimAgent.proxyPort, victimHost);
      expect(victimAnswer.body).toMatchObject({ answer: 'the first answer', secret_seen: victimSecret });
      // Outside the sandbox the same probe does find what it looks for (the test can fail).
      const probeModule: string = join(ROOT, 'test/fixtures/hostile/probe.mjs');
      const { probe } = (await import(probeModule)) as { probe: (t: unknown) => Probe };
      const outside = probe({
        needles,
        walk: [victimWork, dataDir],
        ownCheckout: mkdtempSync(join(tmpdir(), 'cp-outside-')),
        unreachable: [server.databasePath, victimCheckout],
        writes: [],
      });
      expect(outside.found.length).toBeGreaterThan(0);
      expect(outside.reached).toContain(server.databasePath);
    },
  );
});
