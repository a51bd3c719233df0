import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { RevisionRecord } from './store/types.ts';

/** What the cluster-wide gauges read from the database (every process answers the same). */
export type ClusterReadings = {
  githubOutboxPending(): Promise<number>;
  agentHeartbeats(): Promise<Array<{ listener_id: string; last_seen_at: string }>>;
  workPending(): Promise<Array<{ compute_type: string; pending: number }>>;
};

/** Seconds-long operations: from a fast request to a slow deploy. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const DEPLOY_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

/**
 * The process's Prometheus metrics (contract section 17), served on the health port at `/metrics`.
 * Labels hold route templates, methods, statuses, event names, outcomes, compute types and listener
 * ids only: never a path, a name, a key or a secret. Counters and histograms are this process's;
 * the gauges of shared state (`acp_github_outbox_pending`, `acp_agent_heartbeat_age_seconds`,
 * `acp_work_pending`) are read from the database when scraped, so every process reports the cluster.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly #httpRequests: Counter<'method' | 'route' | 'status'>;
  readonly #httpDuration: Histogram<'method' | 'route'>;
  readonly #transitions: Counter<'status'>;
  readonly #deployDuration: Histogram;
  readonly #webhookDeliveries: Counter<'event' | 'outcome'>;
  readonly #githubRequests: Counter<'outcome'>;

  constructor(cluster: ClusterReadings, now: () => number = Date.now) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.#httpRequests = new Counter({
      name: 'acp_http_requests_total',
      help: 'HTTP requests answered, by method, route template and status code.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.#httpDuration = new Histogram({
      name: 'acp_http_request_duration_seconds',
      help: 'Time to answer an HTTP request, by method and route template.',
      labelNames: ['method', 'route'],
      buckets: REQUEST_BUCKETS,
      registers,
    });
    this.#transitions = new Counter({
      name: 'acp_revision_transitions_total',
      help: 'Revision stage changes made by this process, by the status entered.',
      labelNames: ['status'],
      registers,
    });
    this.#deployDuration = new Histogram({
      name: 'acp_deploy_duration_seconds',
      help: 'Time from a revision being created to it being DEPLOYED.',
      buckets: DEPLOY_BUCKETS,
      registers,
    });
    this.#webhookDeliveries = new Counter({
      name: 'acp_webhook_deliveries_total',
      help: 'GitHub webhook deliveries processed, by event and outcome.',
      labelNames: ['event', 'outcome'],
      registers,
    });
    this.#githubRequests = new Counter({
      name: 'acp_github_requests_total',
      help: "Requests to GitHub's API, by outcome (ok, client_error, server_error, rate_limited, network_error).",
      labelNames: ['outcome'],
      registers,
    });
    new Gauge({
      name: 'acp_github_outbox_pending',
      help: 'Status reports to GitHub waiting to be sent (the whole cluster).',
      registers,
      async collect() {
        const pending = await readOrNull(() => cluster.githubOutboxPending());
        if (pending !== null) this.set(pending);
      },
    });
    new Gauge({
      name: 'acp_agent_heartbeat_age_seconds',
      help: "Seconds since each listener's agent was last heard from (the whole cluster).",
      labelNames: ['listener_id'],
      registers,
      async collect() {
        this.reset();
        for (const { listener_id, last_seen_at } of (await readOrNull(() => cluster.agentHeartbeats())) ?? []) {
          this.set({ listener_id }, Math.max(0, (now() - Date.parse(last_seen_at)) / 1000));
        }
      },
    });
    new Gauge({
      name: 'acp_work_pending',
      help: 'Revisions waiting to be built or deployed, by the compute type that serves them (the whole cluster).',
      labelNames: ['compute_type'],
      registers,
      async collect() {
        this.reset();
        for (const { compute_type, pending } of (await readOrNull(() => cluster.workPending())) ?? []) this.set({ compute_type }, pending);
      },
    });
  }

  /** One answered request: `route` is the route's template (`/v2/deployments/:deployment_id`), never its path. */
  httpAnswered(method: string, route: string, status: number, seconds: number): void {
    this.#httpRequests.inc({ method, route, status: String(status) });
    this.#httpDuration.observe({ method, route }, seconds);
  }

  /** A revision entered `revision.status`; a DEPLOYED one tells how long its deploy took. */
  revisionChanged(revision: Pick<RevisionRecord, 'status' | 'created_at' | 'updated_at'>): void {
    this.#transitions.inc({ status: revision.status });
    if (revision.status === 'DEPLOYED') {
      this.#deployDuration.observe(Math.max(0, (Date.parse(revision.updated_at) - Date.parse(revision.created_at)) / 1000));
    }
  }

  webhookDelivery(event: string, outcome: string): void {
    this.#webhookDeliveries.inc({ event, outcome });
  }

  githubRequest(outcome: 'ok' | 'client_error' | 'server_error' | 'rate_limited' | 'network_error'): void {
    this.#githubRequests.inc({ outcome });
  }

  /** The Prometheus text of every metric, for `GET /metrics`. */
  async text(): Promise<{ body: string; contentType: string }> {
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}

/**
 * A cluster reading, or null when the database does not answer: the scrape still gets this
 * process's own metrics (and `/readyz` reports the database), rather than failing whole.
 */
async function readOrNull<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch {
    return null;
  }
}
