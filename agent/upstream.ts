import { request } from 'node:http';

/**
 * Where the proxy reaches an agent server: a unix socket in the deployment's folder (sandboxed
 * servers, in a network namespace of their own: docs/decisions/local-agent-network.md), or a
 * loopback port (`--sandbox none`, and images run by a container engine).
 */
export type Upstream = { socketPath: string } | { port: number };

/** One name per upstream, for the proxy's in-flight counts and the agent's output. */
export function upstreamKey(upstream: Upstream): string {
  return 'socketPath' in upstream ? `unix:${upstream.socketPath}` : `port:${upstream.port}`;
}

/** The connection part of `http.request` options for `upstream`. */
export function connectTo(upstream: Upstream): { socketPath: string } | { host: string; port: number } {
  return 'socketPath' in upstream ? { socketPath: upstream.socketPath } : { host: '127.0.0.1', port: upstream.port };
}

/** Whether the server behind `upstream` answers `GET /ok` with a 2xx within `timeoutMs`. */
export function answersOk(upstream: Upstream, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ ...connectTo(upstream), method: 'GET', path: '/ok', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve((res.statusCode ?? 500) < 300);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end();
  });
}
