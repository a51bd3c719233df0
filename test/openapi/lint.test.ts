import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { REDOCLY, runCli, SPECTRAL, SPECTRAL_RULESET } from './tools.ts';

/**
 * The document a real server serves, linted by Spectral (`spectral:oas`) and Redocly
 * (`recommended`): any error fails. It covers whatever routes are registered, so routes added
 * later are linted too. Warning counts are printed for the record.
 */
describe('the served OpenAPI document', () => {
  const PUBLIC_URL = 'https://control-plane.test';
  let server: ServerProcess;
  let file: string;
  let doc: {
    servers?: Array<{ url: string }>;
    tags?: Array<{ name: string }>;
    components: { securitySchemes: Record<string, unknown> };
    paths: Record<string, Record<string, { operationId?: string; tags?: string[] }>>;
  };

  beforeAll(async () => {
    server = await startServerProcess({ PUBLIC_URL, GITHUB_WEBHOOK_SECRET: 'lint-secret' });
    const res = await fetch(`${server.url}/openapi.json`);
    expect(res.status).toBe(200);
    const text = await res.text();
    doc = JSON.parse(text);
    file = join(mkdtempSync(join(tmpdir(), 'cp-openapi-')), 'openapi.json');
    writeFileSync(file, text);
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('has a unique operationId and a declared tag on every operation, servers from PUBLIC_URL, valid security scheme keys', () => {
    const ids: string[] = [];
    const declared = new Set((doc.tags ?? []).map((tag) => tag.name));
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        expect(op.operationId, `${method} ${path}`).toMatch(/^[A-Za-z0-9_]+$/);
        ids.push(op.operationId!);
        expect(op.tags?.length, `${method} ${path}`).toBe(1);
        expect(declared.has(op.tags![0]!), `${method} ${path} tag ${op.tags![0]}`).toBe(true);
      }
    }
    expect(ids.length).toBeGreaterThan(30);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.servers).toEqual([expect.objectContaining({ url: PUBLIC_URL })]);
    for (const key of Object.keys(doc.components.securitySchemes)) expect(key).toMatch(/^[a-zA-Z0-9._-]+$/);
    // Shared with the hosted API: the hosted document's names.
    expect(doc.paths['/v2/deployments']!.post!.operationId).toBe('create_deployment_v2_deployments_post');
    expect(doc.paths['/v2/deployments/{deployment_id}/revisions/{revision_id}']!.get!.operationId).toBe(
      'get_revision_v2_deployments__deployment_id__revisions__revision_id__get',
    );
    expect(doc.paths['/v2/deployments/{deployment_id}/revisions/{revision_id}']!.get!.tags).toEqual(['Deployments (v2)']);
  });

  it('has no Spectral (spectral:oas) errors', async () => {
    const run = await runCli(SPECTRAL, ['lint', '--ruleset', SPECTRAL_RULESET, '--format', 'json', '--quiet', '--fail-severity', 'error', file]);
    const results = JSON.parse(run.stdout || '[]') as Array<{ code: string; severity: number; message: string; path: string[] }>;
    const errors = results.filter((r) => r.severity === 0);
    const warnings = results.filter((r) => r.severity === 1);
    console.log(`spectral: ${errors.length} errors, ${warnings.length} warnings (${summary(warnings.map((w) => w.code))})`);
    expect(errors.map((e) => `${e.code} at ${e.path.join('.')}: ${e.message}`)).toEqual([]);
    expect(run.code, run.stderr).toBe(0);
  });

  it('has no Redocly (recommended) errors', async () => {
    const run = await runCli(REDOCLY, ['lint', '--extends', 'recommended', '--format', 'json', file]);
    const report = JSON.parse(run.stdout) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
    };
    const errors = report.problems.filter((p) => p.severity === 'error');
    const warnings = report.problems.filter((p) => p.severity === 'warn');
    console.log(`redocly: ${report.totals.errors} errors, ${report.totals.warnings} warnings (${summary(warnings.map((w) => w.ruleId))})`);
    expect(errors.map((e) => `${e.ruleId} at ${e.location[0]?.pointer}: ${e.message}`)).toEqual([]);
    expect(report.totals.errors).toBe(0);
    expect(run.code, run.stderr).toBe(0);
  });
});

function summary(codes: string[]): string {
  const counts = new Map<string, number>();
  for (const code of codes) counts.set(code, (counts.get(code) ?? 0) + 1);
  return [...counts].map(([code, n]) => `${code} ×${n}`).join(', ') || 'none';
}
