import type { Config } from '../config.ts';
import { AgentDataPlane } from '../dataplane/listener-agent.ts';
import { DefaultListener } from '../domain/agents/default-listener.ts';
import { ListenerTokens } from '../domain/agents/listener-tokens.ts';
import { AgentProtocol } from '../domain/agents/protocol.ts';
import { RuntimeLogLimits, type RuntimeLogLimitsConfig } from '../domain/agents/runtime-log-limits.ts';
import { LogCaps } from '../domain/log-caps.ts';
import { SharedWatch } from '../domain/shared-watch.ts';
import type { RepoAccess } from '../github/repo-access.ts';
import type { RouteContext } from '../http/env.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { agentRoutes } from '../routes/agent.ts';
import { listenerTokenRoutes } from '../routes/listener-tokens.ts';
import { workspaceSettingsRoutes } from '../routes/workspace-settings.ts';
import type { Services } from '../services.ts';
import type { AgentStore } from '../store/agents.ts';
import { type Coordination, TOPICS } from '../store/coordination.ts';

/**
 * Listener agents, in two steps because the pipeline needs the data plane and the
 * protocol needs the pipeline: `plane` first (given to the services), then `attach(services)`.
 */
export function createListenerAgents(deps: {
  agents: AgentStore;
  coordination: Coordination;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'AGENT_LEASE_MS' | 'LOG_REVISION_MAX_LINES' | 'LOG_REVISION_MAX_BYTES' | 'LOG_TOKEN_LINES_PER_SECOND' | 'LOG_TOKEN_BYTES_PER_SECOND'> &
    RuntimeLogLimitsConfig;
}) {
  const { agents } = deps;
  // Keyed by listener id: a claim long-poll waits on its listener, new work wakes it, in any process
  // (the agent's long-poll may be held by another process than the one that queued the work).
  const wake = new SharedWatch(deps.coordination, TOPICS.listenerWork);
  const plane = new AgentDataPlane({ agents, wake, clock: deps.clock, log: deps.log, leaseMs: deps.config.AGENT_LEASE_MS, coordination: deps.coordination });
  return {
    plane,
    /** `repoAccess`: installation tokens for private repositories, handed over inside claimed work (with App settings). */
    attach(services: Services, options: { repoAccess?: RepoAccess } = {}) {
      const { store, clock, pipeline } = services;
      const logCaps = new LogCaps({
        revisionMaxLines: deps.config.LOG_REVISION_MAX_LINES,
        revisionMaxBytes: deps.config.LOG_REVISION_MAX_BYTES,
        tokenLinesPerSecond: deps.config.LOG_TOKEN_LINES_PER_SECOND,
        tokenBytesPerSecond: deps.config.LOG_TOKEN_BYTES_PER_SECOND,
      });
      const protocol = new AgentProtocol({
        store,
        agents,
        pipeline,
        plane,
        wake,
        clock,
        leaseMs: deps.config.AGENT_LEASE_MS,
        uploads: services.uploads,
        logCaps,
        runtimeLogLimits: new RuntimeLogLimits(deps.config),
        repoAccess: options.repoAccess,
      });
      // A revoke ends the token's polls and claims here, then in every other process before it
      // answers (acknowledged, as an API key's revoke): a poll held elsewhere gets no more work.
      const endToken = (tokenId: string) =>
        protocol
          .endToken(tokenId)
          .catch((error: unknown) => deps.log.warn("agents: could not give back a revoked token's claims; their leases end them", { error: String(error) }));
      const tokens = new ListenerTokens({
        store,
        agents,
        clock,
        revoked: async (tokenId) => {
          await endToken(tokenId);
          await deps.coordination.publishAcknowledged(TOPICS.listenerTokenRevoked, tokenId);
        },
      });
      const unsubscribe = deps.coordination.subscribe(TOPICS.listenerTokenRevoked, (tokenId) => void endToken(tokenId));
      const defaults = new DefaultListener({ store, agents });
      return {
        protocol,
        routes: (ctx: RouteContext) => {
          listenerTokenRoutes(ctx, tokens);
          agentRoutes(ctx, { tokens, protocol, auth: services.auth, store });
          workspaceSettingsRoutes(ctx, defaults);
        },
        /** Agent routes authenticate by listener token, not by API key. */
        worker: {
          start: () => plane.start(),
          stop: () => {
            plane.stop();
            wake.detach();
            unsubscribe();
          },
        },
      };
    },
  };
}
