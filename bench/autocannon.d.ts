// Just enough of autocannon's API for the benchmark (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  type Histogram = { average: number; mean: number; total: number; p50: number; p99: number; max: number };
  export type Result = { requests: Histogram; latency: Histogram; duration: number; errors: number; timeouts: number; non2xx: number };
  export type Options = {
    url: string;
    connections?: number;
    pipelining?: number;
    duration?: number;
    timeout?: number;
    overallRate?: number;
    requests?: Array<Record<string, unknown>>;
  };
  function autocannon(options: Options, done: (error: Error | null, result: Result) => void): EventEmitter;
  export default autocannon;
}
