import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';

export type ConnectionLimits = {
  /** Connections held at once; more are closed as they arrive (Node's `maxConnections`). */
  maxConnections: number;
  /** Time for a request's headers to arrive, counted from the connection's start for its first request. */
  headersTimeoutMs: number;
  /** Time for a whole request (headers and body) to arrive. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this long without a request. */
  keepAliveTimeoutMs: number;
};

/** Options for `http.createServer`: the timeouts, and checks frequent enough to honour them. */
export function serverOptions(limits: ConnectionLimits): ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node looks for expired requests this often (30 s by default, far past a short header timeout).
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}

/**
 * Applies the limits a slowloris attack runs into. Node's own header timeout only starts once a
 * connection sends its first byte; a connection that opens and sends nothing would be held
 * forever, so such connections are closed here when no request has begun within the header timeout.
 */
export function applyConnectionLimits(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.maxConnections;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const spoken = new WeakSet<Socket>();
  server.on('request', (request) => spoken.add(request.socket));
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      if (!spoken.has(socket)) socket.destroy();
    }, limits.headersTimeoutMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}
