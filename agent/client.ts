import type { AgentHeartbeatAck, AgentTransition, ClaimResponse, LeaseRenewed, LiveDeployments, RuntimeLogsStored, WorkItem } from '../shared/schemas/agent.ts';

/** A 409 from the control plane: the work moved on (interrupted, lease lost); the agent stops it. */
export class WorkGone extends Error {
  override readonly name = 'WorkGone';
}

/** A 429: the control plane takes this agent's log lines more slowly; `retryAfterSeconds` says when to send again. */
export class SlowDown extends Error {
  override readonly name = 'SlowDown';
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** Any other answer that is not a success: `status` says which (a 4xx is not retried). */
export class Refused extends Error {
  override readonly name = 'Refused';
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

/** The agent's side of the listener protocol (docs/listener-protocol.md), over fetch. */
export class AgentClient {
  readonly #base: string;
  readonly #token: string;

  constructor(options: { url: string; token: string; listenerId: string }) {
    this.#base = `${options.url.replace(/\/+$/, '')}/v2/listeners/${options.listenerId}/agent`;
    this.#token = options.token;
  }

  async #call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const response = await fetch(this.#base + path, {
      method,
      headers: { authorization: `Bearer ${this.#token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    const text = await response.text();
    if (response.status === 409) throw new WorkGone(detailOf(text));
    if (response.status === 429) throw new SlowDown(`${method} ${path}: 429 ${detailOf(text)}`, Math.max(1, Number(response.headers.get('retry-after')) || 1));
    if (!response.ok) throw new Refused(`${method} ${path}: ${response.status} ${detailOf(text)}`, response.status);
    return (text ? JSON.parse(text) : null) as T;
  }

  heartbeat(agentId: string, version: string, capacity: number, publicUrl: string | null, signal?: AbortSignal): Promise<AgentHeartbeatAck> {
    return this.#call('POST', '/heartbeat', { agent_id: agentId, version, capacity, public_url: publicUrl }, signal);
  }

  async claim(agentId: string, waitSeconds: number, signal?: AbortSignal): Promise<WorkItem | null> {
    return (await this.#call<ClaimResponse>('POST', '/claim', { agent_id: agentId, wait_seconds: waitSeconds }, signal)).work;
  }

  renew(claimId: string): Promise<LeaseRenewed> {
    return this.#call('POST', `/claims/${claimId}/renew`);
  }

  transition(claimId: string, change: AgentTransition): Promise<unknown> {
    return this.#call('POST', `/claims/${claimId}/transition`, change);
  }

  logs(claimId: string, lines: Array<{ type: 'build' | 'deploy'; level: 'info' | 'warn' | 'error'; message: string; timestamp?: string }>): Promise<void> {
    return this.#call('POST', `/claims/${claimId}/logs`, { lines });
  }

  /** What a live revision's server printed after DEPLOYED; `dropped`: lines the agent did not send. */
  runtimeLogs(
    revisionId: string,
    lines: Array<{ level: 'info' | 'warn' | 'error'; message: string; timestamp?: string }>,
    dropped: number,
  ): Promise<RuntimeLogsStored> {
    return this.#call('POST', `/revisions/${revisionId}/runtime-logs`, { lines, dropped });
  }

  /** `DEPLOYED → DEPLOY_FAILED` of a live revision, outside any claim: its server keeps exiting. */
  failLive(revisionId: string, statusMessage: string): Promise<unknown> {
    return this.#call('POST', `/revisions/${revisionId}/transition`, { from: 'DEPLOYED', to: 'DEPLOY_FAILED', status_message: statusMessage });
  }

  done(claimId: string): Promise<void> {
    return this.#call('POST', `/claims/${claimId}/done`);
  }

  release(claimId: string): Promise<void> {
    return this.#call('DELETE', `/claims/${claimId}`);
  }

  live(signal?: AbortSignal): Promise<LiveDeployments> {
    return this.#call('GET', '/live', undefined, signal);
  }
}

function detailOf(text: string): string {
  try {
    const body = JSON.parse(text) as { detail?: unknown };
    return typeof body.detail === 'string' ? body.detail : text;
  } catch {
    return text;
  }
}
