import { randomBytes } from 'node:crypto';
import type { ListenerToken, ListenerTokenCreated } from '../../../shared/schemas/agent.ts';
import { hashApiKey, sameDigest } from '../../crypto/api-key.ts';
import type { Clock } from '../../lib/clock.ts';
import { auditSubject } from '../../lib/request-scope.ts';
import type { AgentStore } from '../../store/agents.ts';
import type { ListenerStore } from '../../store/types.ts';
import { BadRequest, NotFound, Unauthorized } from '../errors.ts';

/** Agent tokens carry their own prefix, so a log or a support request tells them from API keys. */
const PREFIX = 'lat_';

/** The listeners a listener agent serves; `sandbox` ones are carried by the control plane itself. */
export const AGENT_COMPUTE_TYPES: ReadonlySet<string> = new Set(['local', 'k8s']);

/** Who an agent request comes from: a listener, through one of its tokens. */
export type AgentPrincipal = { listenerId: string; tenantId: string; tokenId: string; tokenHash: string };

/**
 * Agent credentials of a listener: shown once, stored as SHA-256 hashes, revocable. A token
 * authenticates only the agent routes of its own listener; API keys are not accepted there.
 */
export class ListenerTokens {
  readonly #store: Pick<ListenerStore, 'getListener'>;
  readonly #agents: AgentStore;
  readonly #clock: Clock;
  readonly #revoked: (tokenId: string) => Promise<void>;

  /**
   * `revoked` runs once a revoke is stored and before it answers: it ends what the token is doing
   * in every process (its waiting polls, its claims), so the revoke holds from its answer on.
   */
  constructor(deps: { store: Pick<ListenerStore, 'getListener'>; agents: AgentStore; clock: Clock; revoked?: (tokenId: string) => Promise<void> }) {
    this.#store = deps.store;
    this.#agents = deps.agents;
    this.#clock = deps.clock;
    this.#revoked = deps.revoked ?? (async () => {});
  }

  async create(tenantId: string, listenerId: string): Promise<ListenerTokenCreated> {
    const listener = await this.#listener(tenantId, listenerId);
    // The built-in sandbox carries its listeners' revisions itself: an agent there would race it for the same work (and its secrets).
    if (!AGENT_COMPUTE_TYPES.has(listener.compute_type)) {
      throw new BadRequest(
        `Listener ${listenerId} is a ${listener.compute_type} listener, served by the control plane itself; agent tokens are for local and k8s listeners.`,
      );
    }
    const token = PREFIX + randomBytes(32).toString('base64url');
    const created = { id: crypto.randomUUID(), listener_id: listenerId, token, created_at: this.#clock.now() };
    auditSubject(created.id);
    await this.#agents.createToken({ id: created.id, listenerId, tenantId, tokenHash: hashApiKey(token), now: created.created_at });
    return created;
  }

  async list(tenantId: string, listenerId: string): Promise<ListenerToken[]> {
    await this.#listener(tenantId, listenerId);
    return (await this.#agents.listTokens(listenerId)).map((t) => ({ id: t.id, listener_id: t.listener_id, created_at: t.created_at }));
  }

  async revoke(tenantId: string, listenerId: string, tokenId: string): Promise<void> {
    await this.#listener(tenantId, listenerId);
    if (!(await this.#agents.revokeToken(listenerId, tokenId, this.#clock.now()))) throw new NotFound(`Listener token ID ${tokenId} not found.`);
    await this.#revoked(tokenId);
  }

  /** The listener the token belongs to, when it is the one the path names. */
  async authenticate(token: string | undefined, listenerId: string): Promise<AgentPrincipal> {
    const agent = await this.authenticateAgent(token);
    // Another listener's token: answer as if the listener did not exist for this caller.
    if (agent.listenerId !== listenerId) throw new NotFound(`Listener ID ${listenerId} not found.`);
    return agent;
  }

  /** The listener the token belongs to (agent routes whose path names no listener: `/v2/agent/…`). */
  async authenticateAgent(token: string | undefined): Promise<AgentPrincipal> {
    if (!token) throw new Unauthorized('Missing listener token: send it as Authorization: Bearer <token>.');
    if (!token.startsWith(PREFIX)) throw new Unauthorized('Agent routes take a listener token (POST /v2/listeners/{id}/tokens), not an API key.');
    const hash = hashApiKey(token);
    const record = await this.#agents.findToken(hash);
    if (!record || record.revoked || !sameDigest(record.token_hash, hash)) throw new Unauthorized('Invalid or revoked listener token.');
    return { listenerId: record.listener_id, tenantId: record.tenant_id, tokenId: record.id, tokenHash: record.token_hash };
  }

  async #listener(tenantId: string, listenerId: string) {
    const listener = await this.#store.getListener(tenantId, listenerId);
    if (!listener) throw new NotFound(`Listener ID ${listenerId} not found.`);
    return listener;
  }
}
