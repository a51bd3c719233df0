import { join } from 'node:path';
import { adoptAgentServer, endOrphan } from './agent-server.ts';
import { isBuilt } from './build-records.ts';
import type { AgentClient } from './client.ts';
import type { LiveServers } from './live-servers.ts';

/**
 * At the agent's start: serves again every live revision of the listener whose build is on this
 * machine. A server the previous agent left serving is taken over as it is (its threads and runs go
 * on untouched); otherwise the revision's server is started again from its build directory, without
 * a rebuild. A revision built elsewhere is left to a new revision.
 */
export async function takeOverLive(options: {
  client: AgentClient;
  servers: LiveServers;
  workDir: string;
  signal: AbortSignal;
  print: (line: string) => void;
}): Promise<void> {
  const { client, servers, workDir, signal, print } = options;
  const { deployments } = await client.live(signal);
  for (const { deployment, revision } of deployments) {
    if (signal.aborted) return;
    const buildDir = join(workDir, deployment.id, revision.id);
    if (!isBuilt(buildDir)) {
      print(`agent: ${deployment.name}: revision ${revision.id} was not built on this machine; not serving it`);
      continue;
    }
    const runtimeLogs = servers.runtimeLogs(revision.id);
    const adopted = await adoptAgentServer(buildDir, (line) => runtimeLogs.line(line));
    if (adopted) {
      servers.serve(deployment, revision, buildDir, adopted, runtimeLogs);
      print(`agent: ${deployment.name}: took over the agent server (pid ${adopted.pid}) of revision ${revision.id} that the previous agent left serving`);
      continue;
    }
    const ended = await endOrphan(buildDir);
    if (ended) print(`agent: ${deployment.name}: ${ended}`);
    try {
      const server = await servers.startServer(deployment.id, buildDir, revision, (line) => runtimeLogs.line(line), signal);
      servers.serve(deployment, revision, buildDir, server, runtimeLogs);
      print(`agent: ${deployment.name}: restarted revision ${revision.id} from its build directory (no rebuild)`);
    } catch (error) {
      print(`agent: ${deployment.name}: could not restart revision ${revision.id}: ${(error as Error).message}`);
    }
  }
}
