import type { Config } from '../config.ts';
import { AgentDataPlane } from '../dataplane/listener-agent.ts';
import { DefaultListener } from '../domain/agents/default-listener.ts';
import { ListenerTokens } from '../domain/agents/listener-tokens.ts';
import { AgentProtocol } from '../domain/agents/protocol.ts';
import { RuntimeLogLimits, type RuntimeLogLimitsConfig } from '../domain/agents/runtime-log-limits.ts';
import { LogCaps } from '../domain/log-caps.ts';
import type { Pipeline } from '../domain/pipeline.ts';
import type { RepositoryAccess } from '../domain/repository-access.ts';
import { SharedWatch } from '../domain/shared-watch.ts';
import type { Uploads } from '../domain/uploads.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { agentRoutes } from '../routes/agent.ts';
import { listenerTokenRoutes } from '../routes/listener-tokens.ts';
import { listenerRoutes } from '../routes/listeners.ts';
import { workspaceSettingsRoutes } from '../routes/workspace-settings.ts';
import type { AgentStore } from '../store/agents.ts';
import { type Coordination, TOPICS } from '../store/coordination.ts';
import type { Feature, StoreSliceOf } from './feature.ts';

/**
 * The data plane of `local` and `k8s` listeners, as the pipeline sees it (one of its data planes),
 * with the wake-ups of the agents' claim long-polls. Built before the pipeline, which hands it work;
 * the listener-agents feature is built after, from both (it reports the agents' stage changes to
 * the pipeline). Keyed by listener id: new work wakes a listener's long-poll in any process (the
 * agent's poll may be held by another process than the one that queued the work).
 */
export function listenerAgentPlane(deps: {
  agents: AgentStore;
  coordination: Coordination;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'AGENT_LEASE_MS'>;
}) {
  const wake = new SharedWatch(deps.coordination, TOPICS.listenerWork);
  const plane = new AgentDataPlane({
    agents: deps.agents,
    wake,
    clock: deps.clock,
    log: deps.log,
    leaseMs: deps.config.AGENT_LEASE_MS,
    coordination: deps.coordination,
  });
  return { plane, wake };
}

export type ListenerAgentPlane = ReturnType<typeof listenerAgentPlane>;

/** The core tables as the agents' side reads them: the protocol's, the tokens' and the default listener's slices. */
export type ListenerAgentsStore = StoreSliceOf<typeof AgentProtocol> & StoreSliceOf<typeof ListenerTokens> & StoreSliceOf<typeof DefaultListener>;

/**
 * Listeners and their agents (contract §§6, 9, 14): the listeners, their agent tokens, the agent
 * protocol (claims, leases, stage changes, logs, sources), the workspace's default listener, and
 * the agent data plane's worker. A token's revoke ends its polls and claims in every process.
 */
export function listenerAgentsFeature(deps: {
  agentPlane: ListenerAgentPlane;
  store: ListenerAgentsStore;
  agents: AgentStore;
  pipeline: Pipeline;
  uploads: Uploads;
  coordination: Coordination;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'AGENT_LEASE_MS' | 'LOG_REVISION_MAX_LINES' | 'LOG_REVISION_MAX_BYTES' | 'LOG_TOKEN_LINES_PER_SECOND' | 'LOG_TOKEN_BYTES_PER_SECOND'> &
    RuntimeLogLimitsConfig;
  /** Installation tokens for private repositories, handed over inside claimed work (with GitHub App settings). */
  repoAccess?: RepositoryAccess;
}): Feature {
  const { store, agents, clock, coordination, config } = deps;
  const { plane, wake } = deps.agentPlane;
  const logCaps = new LogCaps({
    revisionMaxLines: config.LOG_REVISION_MAX_LINES,
    revisionMaxBytes: config.LOG_REVISION_MAX_BYTES,
    tokenLinesPerSecond: config.LOG_TOKEN_LINES_PER_SECOND,
    tokenBytesPerSecond: config.LOG_TOKEN_BYTES_PER_SECOND,
  });
  const protocol = new AgentProtocol({
    store,
    agents,
    pipeline: deps.pipeline,
    plane,
    wake,
    clock,
    leaseMs: config.AGENT_LEASE_MS,
    uploads: deps.uploads,
    logCaps,
    runtimeLogLimits: new RuntimeLogLimits(config),
    repoAccess: deps.repoAccess,
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
      await coordination.publishAcknowledged(TOPICS.listenerTokenRevoked, tokenId);
    },
  });
  const unsubscribe = coordination.subscribe(TOPICS.listenerTokenRevoked, (tokenId) => void endToken(tokenId));
  const defaults = new DefaultListener({ store, agents });
  return {
    name: 'listener-agents',
    routes(ctx) {
      listenerRoutes(ctx);
      listenerTokenRoutes(ctx, tokens);
      // Agent routes authenticate by listener token, not by API key.
      agentRoutes(ctx, { tokens, protocol, auth: ctx.services.auth, store: ctx.services.store });
      workspaceSettingsRoutes(ctx, defaults);
    },
    workers: [
      {
        start: () => plane.start(),
        stop: () => {
          plane.stop();
          wake.detach();
          unsubscribe();
        },
      },
    ],
  };
}
