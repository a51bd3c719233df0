/**
 * How long the tests' HTTP servers keep an idle keep-alive connection: the server processes'
 * KEEP_ALIVE_TIMEOUT_MS and the in-test stand-ins' `keepAliveTimeout`, longer than any file runs.
 *
 * A client (Node's fetch) keeps an idle connection until the server's `Keep-Alive: timeout` hint
 * less a second or two, then closes it. On a loaded machine the client's process can be starved
 * past that margin: its timer has not run when it sends the next request on the connection, which
 * the server closed meanwhile, and the request fails with `fetch failed: other side closed`
 * (whole runs with three workers, in agent files whose requests are seconds apart). With the
 * hint at ten minutes no connection of a test sits idle that long; the keep-alive timeout itself
 * is tested with its own short value (test/hardening/slowloris.test.ts).
 */
export const TEST_KEEP_ALIVE_MS = 600_000;
