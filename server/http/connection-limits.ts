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
 * The timer goes at the connection's first request (or its close), so a connection held open by a
 * long-poll keeps no timer, callback or listener of this (test/e2e/long-poll-memory.test.ts).
 */
export function applyConnectionLimits(server: Server, limits: ConnectionLimits): void {
  server.maxConnections = limits.maxConnections;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const silent = new WeakMap<Socket, NodeJS.Timeout>();
  // One listener function for every socket (`this` is the socket): no closure per connection.
  function spoke(this: Socket): void {
    clearTimeout(silent.get(this));
    silent.delete(this);
    this.off('close', spoke);
  }
  server.on('request', (request) => {
    if (silent.has(request.socket)) spoke.call(request.socket);
  });
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(closeSilent, limits.headersTimeoutMs, socket);
    timer.unref();
    silent.set(socket, timer);
    socket.on('close', spoke);
  });
}

function closeSilent(socket: Socket): void {
  socket.destroy();
}
