import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findCgroups } from '../../agent/cgroups.ts';
import { SANDBOX_AGENT_MODULES } from '../../agent/sandbox.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { gzipTarball } from '../helpers/tarball.ts';
import { type AgentProcess, FIXTURE, killLeftoverServers, localScene, startAgent } from './harness.ts';

/** The memory (MiB) and CPU (cores) the cgroup of a revision's server allows, as the kernel has them. */
function serverCgroupLimits(revisionId: string): { memoryMb: number; cpus: number } {
  const host = findCgroups();
  const name = `${revisionId}.server`;
  if (host.version === 2) {
    const dir = join(host.root, name);
    const [quota, period] = readFileSync(join(dir, 'cpu.max'), 'utf8').trim().split(' ').map(Number) as [number, number];
    return { memoryMb: Number(readFileSync(join(dir, 'memory.max'), 'utf8')) / 1024 / 1024, cpus: quota / period };
  }
  const read = (root: string, file: string) => Number(readFileSync(join(root, 'cp-agent', name, file), 'utf8'));
  return {
    memoryMb: read(host.roots.memory, 'memory.limit_in_bytes') / 1024 / 1024,
    cpus: read(host.roots.cpu, 'cpu.cfs_quota_us') / read(host.roots.cpu, 'cpu.cfs_period_us'),
  };
}

/**
 * Contract §15: a server's memory and CPU are the deployment's `resource_spec.memory_limit_mb` /
 * `cpu_limit` when set (with the hosted API's defaults: twice `memory_mb` / `cpu`), else the
 * agent's flags. Read from the server's cgroup while it serves: real agent, cgroups, bwrap.
 */
describe('a deployment’s resource_spec on a local listener', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-spec-'));

  afterAll(async () => {
    await agent?.stop('SIGINT');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('sets its server’s cgroup limits; without one the agent’s flags hold', { timeout: 600_000 }, async () => {
    const scene = await localScene();
    server = scene.server;
    const { api, listenerId, token } = scene;
    agent = await startAgent({ url: server.url, token, listenerId, workDir, args: ['--memory-max-mb', '700', '--cpu-max', '1.5'] });
    const _ends = (id: string, revisionId: string) =>
      revisionReaches(api, id, revisionId, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000).then((revision) => {
        expect(revision.status, `${revision.status_message}\n${agent!.output()}`).toBe('DEPLOYED');
        return revision;
      });
    // The way a resource_spec reaches a local listener: `langgraph deploy` (internal_source; a
    // github deployment takes none, as on the hosted API), its tarball uploaded, then the PATCH.
    const tarball = await gzipTarball({
      'langgraph.json': readFileSync(join(FIXTURE, 'langgraph.json'), 'utf8'),
      'src/graph.mjs': readFileSync(join(FIXTURE, 'src/graph.mjs'), 'utf8'),
    });
    const deployed = async (resourceSpec: Record<string, number> | null) => {
      const created = await api.post('/v2/deployments', {
        name: uniqueName('spec'),
        source: 'internal_source',
        source_config: { install_command: `ln -s ${SANDBOX_AGENT_MODULES} node_modules`, ...(resourceSpec ? { resource_spec: resourceSpec } : {}) },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const { id } = created.body as { id: string };
      const issued = await api.post(`/v2/deployments/${id}/upload-url`);
      expect(issued.status, JSON.stringify(issued.body)).toBe(200);
      const put = await fetch(issued.body.upload_url as string, { method: 'PUT', headers: { 'content-type': 'application/gzip' }, body: tarball });
      expect(put.ok, await put.text()).toBe(true);
      const patched = await api.patch(`/v2/deployments/${id}`, {
        revision_source: 'internal_source',
        source_revision_config: { source_tarball_path: issued.body.object_path, langgraph_config_path: 'langgraph.json' },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      const revision = await revisionReaches(api, id, patched.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
      expect(revision.status, `${revision.status_message}\n${agent!.output()}`).toBe('DEPLOYED');
      return serverCgroupLimits(revision.id);
    };

    expect(await deployed({ memory_limit_mb: 600, cpu_limit: 0.5 })).toEqual({ memoryMb: 600, cpus: 0.5 });
    // The hosted API's defaults: a limit of twice the request.
    expect(await deployed({ memory_mb: 320, cpu: 0.25 })).toEqual({ memoryMb: 640, cpus: 0.5 });
    expect(await deployed(null)).toEqual({ memoryMb: 700, cpus: 1.5 });
  });
});
