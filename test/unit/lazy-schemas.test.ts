import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { lazySchema } from '../../shared/schemas/lazy.ts';
import { testBackendKind, testDatabaseUrl } from '../helpers/backends.ts';

/**
 * The schemas of shared/ (and the server's own module-level ones) are built on first use
 * (shared/schemas/lazy.ts): a start builds none of them, a request builds its route's. Building
 * them all at import was most of what the start spent beyond zod's own load
 * (docs/decisions/server-start.md). Counts, not timings.
 */
describe('schemas built on first use', () => {
  it('a start and its first /healthz build no zod schema beyond the configuration; a validated request builds its own', async () => {
    // zod calls this after building each schema (its hook for ahead-of-time compilation, unused here).
    const zodConfig = ((globalThis as { __zod_globalConfig?: { postProcessor?: (schema: unknown) => void } }).__zod_globalConfig ??= {});
    expect(zodConfig.postProcessor).toBeUndefined();
    let made = 0;
    zodConfig.postProcessor = () => {
      made += 1;
    };
    try {
      // Imported here, after the count starts: everything the server's modules build at import is counted.
      // Evaluated anew: the files before this one in its worker (isolate: false, vitest.config.ts) may
      // have imported them, and the lazy schemas' count with them.
      vi.resetModules();
      const { lazySchemasBuilt } = await import('../../shared/schemas/lazy.ts');
      const { loadConfig } = await import('../../server/config.ts');
      const afterConfig = made;
      const { silentLogger } = await import('../../server/logger.ts');
      const { startServer } = await import('../../server/server.ts');
      const key = `lazy-${randomBytes(16).toString('hex')}`;
      const databaseUrl = await testDatabaseUrl(testBackendKind(), join(mkdtempSync(join(tmpdir(), 'cp-lazy-')), 'control-plane.db'));
      const config = loadConfig({
        DATABASE_URL: databaseUrl,
        PORT: '0',
        LOG_LEVEL: 'silent',
        ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        BOOTSTRAP_API_KEY: key,
      });
      const server = await startServer(config, { log: silentLogger, print: () => {} });
      try {
        expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200);
        expect(lazySchemasBuilt()).toBe(0);
        // The configuration's schema is the one a start needs (some 415 schema objects). Importing the
        // server's modules built some 1,800 more before this change; what is left is route
        // registration's handful (a few `z.string()` for path parameters, ~40 in all).
        expect(afterConfig).toBeGreaterThan(100);
        expect(made - afterConfig).toBeLessThan(100);

        const invalid = await fetch(`http://127.0.0.1:${server.port}/v2/deployments`, {
          method: 'POST',
          headers: { 'x-api-key': key, 'content-type': 'application/json' },
          body: '{"source": "github"}',
        });
        expect(invalid.status).toBe(422);
        expect(((await invalid.json()) as { detail: Array<{ loc: string[] }> }).detail.map((issue) => issue.loc.join('.'))).toContain('body.name');
        expect(lazySchemasBuilt()).toBeGreaterThan(5);
      } finally {
        await server.close();
      }
    } finally {
      zodConfig.postProcessor = undefined;
    }
  });

  it('a lazy schema is built once, on first use, and then is the schema: same identity, parse, errors, metadata and JSON Schema', () => {
    let builds = 0;
    const eager = () => z.object({ name: z.string().min(2), size: z.int().optional() }).describe('A thing');
    const Thing = lazySchema(() => {
      builds += 1;
      return eager();
    });
    const Things = lazySchema(() => z.array(Thing).meta({ id: 'Things' }));
    expect(builds).toBe(0);
    // Built by the outer schema's first use, not by being named inside it.
    expect(Things.parse([{ name: 'ab' }])).toEqual([{ name: 'ab' }]);
    expect(builds).toBe(1);
    expect(Thing instanceof z.ZodObject).toBe(true);
    expect((Things._zod.def as { element: unknown }).element).toBe(Thing);
    expect(Thing.safeParse({ name: 'a', size: 1.5 }).error?.issues).toEqual(eager().safeParse({ name: 'a', size: 1.5 }).error?.issues);
    expect(z.globalRegistry.get(Thing)).toEqual({ description: 'A thing' });
    expect(z.toJSONSchema(Thing)).toEqual(z.toJSONSchema(eager()));
    expect(z.toJSONSchema(Things)).toMatchObject({
      $ref: '#/$defs/Things',
      $defs: { Things: { type: 'array', items: { description: 'A thing', type: 'object' } } },
    });
    // Methods wrap the lazy schema itself (the identity every registry and JSON Schema walk sees).
    expect((Thing.optional()._zod.def as { innerType: unknown }).innerType).toBe(Thing);
    expect(Object.getPrototypeOf(Thing)).toBe(Object.getPrototypeOf(eager()));
    expect(builds).toBe(1);
  });

  it('a lazy schema that reads itself while it is built says so instead of recursing', () => {
    const Loop: z.ZodType = lazySchema(() => z.array(Loop.optional()));
    expect(() => Loop.parse([])).toThrow(/refers to itself/);
  });
});
