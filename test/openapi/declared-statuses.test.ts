import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp } from '../helpers/in-process.ts';

type Parameter = { name: string; in: string; required?: boolean; schema?: { format?: string; type?: string } };
type Operation = {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, unknown> }>;
  security?: unknown[];
};

/**
 * Every operation of the served document, sent the usual wrong requests (no key, a wrong key,
 * ids that are not uuids, unknown ids, bodies that are not JSON, too large, malformed, empty,
 * query values of the wrong type): every status it answers is one the document lists for it, and
 * every JSON error is `{"detail": …}`. Routes registered later are covered without listing them.
 */
describe('every status a route answers is declared for it', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let doc: { paths: Record<string, Record<string, Operation>> };
  beforeAll(async () => {
    t = await inProcessApp();
    doc = (await (await t.app.request('/openapi.json')).json()) as typeof doc;
  });
  afterAll(() => t?.close());

  it('for the usual wrong requests to every operation', async () => {
    const undeclared: string[] = [];
    let sent = 0;
    for (const [template, operations] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
        const queryParams = (op.parameters ?? []).filter((p) => p.in === 'query');
        const fill = (value: (p: Parameter) => string) => pathParams.reduce((path, p) => path.replace(`{${p.name}}`, encodeURIComponent(value(p))), template);
        const unknownIds = fill((p) => (p.schema?.format === 'uuid' ? crypto.randomUUID() : 'no-such-thing'));
        const key = { 'x-api-key': t.apiKey };
        const json = { ...key, 'content-type': 'application/json' };
        const cases: Array<{ what: string; path: string; headers: Record<string, string>; body?: string }> = [
          { what: 'no key', path: unknownIds, headers: {} },
          { what: 'wrong key', path: unknownIds, headers: { 'x-api-key': 'not-a-key' } },
          { what: 'unknown ids', path: unknownIds, headers: key },
          { what: 'another workspace', path: unknownIds, headers: { ...key, 'x-tenant-id': crypto.randomUUID() } },
        ];
        if (pathParams.length > 0) cases.push({ what: 'ids that are not uuids', path: fill(() => 'not-a-uuid'), headers: key });
        for (const p of queryParams)
          cases.push({ what: `query ${p.name} of a wrong type`, path: `${unknownIds}?${p.name}=${encodeURIComponent('-1x[]')}`, headers: key });
        if (op.requestBody) {
          cases.push(
            { what: 'a body that is not JSON', path: unknownIds, headers: { ...key, 'content-type': 'text/plain' }, body: 'hello' },
            { what: 'malformed JSON', path: unknownIds, headers: json, body: '{"a": ' },
            { what: 'an empty object', path: unknownIds, headers: json, body: '{}' },
            { what: 'a body over 25 MiB', path: unknownIds, headers: json, body: `{"a": "${'x'.repeat(26 * 1024 * 1024)}"}` },
          );
        }
        for (const c of cases) {
          const response = await t.app.request(c.path, { method: method.toUpperCase(), headers: c.headers, body: c.body });
          sent += 1;
          const declared = op.responses[String(response.status)];
          if (!declared) {
            undeclared.push(`${method.toUpperCase()} ${template} (${c.what}) → ${response.status} ${(await response.text()).slice(0, 120)}`);
            continue;
          }
          const type = response.headers.get('content-type') ?? '';
          if (response.status >= 400 && type.includes('application/json')) {
            const body = (await response.json()) as { detail?: unknown };
            if (body.detail === undefined) undeclared.push(`${method.toUpperCase()} ${template} (${c.what}) → ${response.status} without detail`);
          }
        }
      }
    }
    expect(sent).toBeGreaterThan(150);
    expect(undeclared).toEqual([]);
  });
});
