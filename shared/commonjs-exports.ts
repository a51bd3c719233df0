/**
 * The exports of a CommonJS package loaded with `import()`: `import('pkg').then(commonJsExports)`.
 * Node gives them as the namespace's named exports and as its `default` (`module.exports`); the
 * server's bundle (server/build.ts, esbuild split at each `import()`) gives a chunk whose only export
 * is that `default`, so the named ones read undefined there: `npm start` with
 * OTEL_EXPORTER_OTLP_ENDPOINT set exited with "OTLPTraceExporter is not a constructor" (found when
 * the tests started the bundle). Not for an ES module with a default export of its own.
 */
export function commonJsExports<T extends object>(namespace: T): T {
  return (namespace as { default?: T }).default ?? namespace;
}
