import autocannon from 'autocannon';

export type LoadRequest = {
  method: 'GET' | 'POST' | 'PATCH';
  path: string;
  headers?: Record<string, string>;
  /** A fresh body for each request (unique names, new secret values). */
  body?: () => string;
  /**
   * The same as text, for a generator in another process (functions do not cross): every
   * `{{unique}}` is replaced by a value unique to the request. Given beside `body`.
   */
  bodyTemplate?: string;
};

export type LoadResult = {
  rps: number;
  p50: number;
  p99: number;
  max: number;
  requests: number;
  /** Responses outside 2xx/304 plus socket errors and timeouts: a run with any is not a valid figure. */
  failures: number;
};

export type LoadOptions = {
  connections: number;
  seconds: number;
  /** Requests per second over all connections: the open-loop (rate-limited) run. */
  rate?: number;
  /** Several paths, used round-robin by each connection (e.g. different deployments). */
  requests: LoadRequest[];
};

/**
 * One autocannon run (no pipelining). Latencies are taken from autocannon's per-response timings
 * (fractional ms) rather than its integer-ms histogram, so sub-millisecond figures stay visible.
 */
export function runLoad(url: string, options: LoadOptions): Promise<LoadResult> {
  const times: number[] = [];
  let failures = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: options.connections,
        pipelining: 1,
        duration: options.seconds,
        timeout: 30,
        ...(options.rate ? { overallRate: options.rate } : {}),
        requests: options.requests.map((request) => ({
          method: request.method,
          path: request.path,
          headers: { ...(request.body ? { 'content-type': 'application/json' } : {}), ...request.headers },
          ...(request.body
            ? {
                setupRequest: (raw: Record<string, unknown>) => ({ ...raw, body: request.body!() }),
              }
            : {}),
        })),
      },
      (error, result) => {
        if (error) return reject(error);
        const sorted = Float64Array.from(times).sort();
        const at = (q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN);
        resolve({
          rps: result.requests.total / (result.duration || options.seconds),
          p50: at(0.5),
          p99: at(0.99),
          max: sorted.length ? sorted[sorted.length - 1]! : NaN,
          requests: result.requests.total,
          failures: failures + result.errors + result.timeouts,
        });
      },
    );
    instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      if ((statusCode >= 200 && statusCode < 300) || statusCode === 304) times.push(responseTime);
      else failures += 1;
    });
  });
}
