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
  readonly #http = new HttpAnswers(REQUEST_BUCKETS);
  readonly #transitions: Counter<'status'>;
  readonly #deployDuration: Histogram;
  readonly #webhookDeliveries: Counter<'event' | 'outcome'>;
  readonly #githubRequests: Counter<'outcome'>;

  constructor(cluster: ClusterReadings, now: () => number = Date.now) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    // Counted in plain numbers on every answer and read by prom-client when scraped (`HttpAnswers`).
    this.registry.registerMetric(this.#http.requests('acp_http_requests_total', 'HTTP requests answered, by method, route template and status code.'));
    this.registry.registerMetric(this.#http.durations('acp_http_request_duration_seconds', 'Time to answer an HTTP request, by method and route template.'));
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
    this.#http.add(method, route, status, seconds);
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

/** One method and route's answers: how many by status, and their durations as a histogram's buckets. */
type RouteAnswers = {
  method: string;
  route: string;
  byStatus: Map<number, StatusCount>;
  /** The last status counted and its count (the same one answer after answer: the lane's 200s). */
  last: StatusCount;
  buckets: number[];
  count: number;
  sum: number;
};
/** One status's answers: a cell, so counting one more is one look-up (or none), not a get and a set. */
type StatusCount = { status: number; n: number };

/** A route's `last` before its first answer: NaN equals no status, so it is never counted. */
const NO_STATUS: StatusCount = Object.freeze({ status: Number.NaN, n: 0 }) as StatusCount;

/**
 * The HTTP answers, counted in plain numbers (maps keyed by route template, method and status) and
 * handed to prom-client in its own metric shape when scraped, so prom-client still writes the
 * exposition text. Its `Counter.inc` and `Histogram.observe` hash and validate their labels on
 * every call: about a tenth of the CPU of a GET revision answered by the fast lane.
 */
class HttpAnswers {
  readonly #bounds: number[];
  readonly #byRoute = new Map<string, Map<string, RouteAnswers>>();
  #last: RouteAnswers | undefined;

  constructor(bounds: number[]) {
    this.#bounds = bounds;
  }

  add(method: string, route: string, status: number, seconds: number): void {
    const answers = this.#answersOf(method, route);
    let counted = answers.last;
    if (counted.status !== status) {
      const known = answers.byStatus.get(status);
      counted = known ?? { status, n: 0 };
      if (!known) answers.byStatus.set(status, counted);
      answers.last = counted;
    }
    counted.n += 1;
    answers.count += 1;
    answers.sum += seconds;
    // Non-cumulative here; made cumulative when scraped. Past the last bound only `+Inf` (the count) has it.
    // A loop, not `findIndex`, which made a closure per answer.
    const bounds = this.#bounds;
    for (let bucket = 0; bucket < bounds.length; bucket += 1) {
      if (seconds <= bounds[bucket]!) {
        answers.buckets[bucket]! += 1;
        break;
      }
    }
  }

  /**
   * The answers of `method` and `route`. The last pair's are kept at hand: the same route answered
   * again (the GET revision lane's, thousands a second) skips both map look-ups, its template and
   * method being the same string objects each time.
   */
  #answersOf(method: string, route: string): RouteAnswers {
    const last = this.#last;
    if (last !== undefined && last.route === route && last.method === method) return last;
    let byMethod = this.#byRoute.get(route);
    if (!byMethod) this.#byRoute.set(route, (byMethod = new Map()));
    let answers = byMethod.get(method);
    if (!answers)
      byMethod.set(method, (answers = { method, route, byStatus: new Map(), last: NO_STATUS, buckets: this.#bounds.map(() => 0), count: 0, sum: 0 }));
    this.#last = answers;
    return answers;
  }

  #reset(): void {
    this.#byRoute.clear();
    this.#last = undefined;
  }

  *#all(): Iterable<RouteAnswers> {
    for (const byMethod of this.#byRoute.values()) yield* byMethod.values();
  }

  /** The counter of answers by method, route and status, as a prom-client metric. */
  requests(name: string, help: string): PromMetric {
    const values = () =>
      [...this.#all()].flatMap((a) =>
        [...a.byStatus.values()].map(({ status, n }) => ({ labels: { method: a.method, route: a.route, status: String(status) }, value: n })),
      );
    return promMetric(name, help, 'counter', values, () => this.#reset());
  }

  /** The histogram of answer durations by method and route, as prom-client's `Histogram` writes its values. */
  durations(name: string, help: string): PromMetric {
    const values = (): PromValue[] =>
      [...this.#all()].flatMap((a): PromValue[] => {
        const labels = { method: a.method, route: a.route };
        let cumulative = 0;
        return [
          ...this.#bounds.map((le, i) => ({ labels: { le }, sharedLabels: labels, value: (cumulative += a.buckets[i]!), metricName: `${name}_bucket` })),
          { labels: { le: '+Inf' }, sharedLabels: labels, value: a.count, metricName: `${name}_bucket` },
          { labels: {}, sharedLabels: labels, value: a.sum, metricName: `${name}_sum` },
          { labels: {}, sharedLabels: labels, value: a.count, metricName: `${name}_count` },
        ];
      });
    return promMetric(name, help, 'histogram', values, () => this.#reset());
  }
}

type PromValue = { labels: Record<string, string | number>; sharedLabels?: Record<string, string>; value: number; metricName?: string };
/** What prom-client's registry reads of a metric (`registerMetric`): its values when scraped, and a reset. */
type PromMetric = Parameters<Registry['registerMetric']>[0];

function promMetric(name: string, help: string, type: 'counter' | 'histogram', values: () => PromValue[], reset: () => void): PromMetric {
  const data = () => ({ name, help, type, values: values(), aggregator: 'sum' as const });
  return {
    name,
    help,
    type,
    aggregator: 'sum',
    reset,
    async getForPromString() {
      return data();
    },
    // The JSON form (`getMetricsAsJSON`) has the shared labels among the others, as prom-client's own.
    async get() {
      const d = data();
      return { ...d, values: d.values.map(({ sharedLabels, ...v }) => ({ ...v, labels: { ...v.labels, ...sharedLabels } })) };
    },
  } as unknown as PromMetric;
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
