import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { testBackendKind } from '../helpers/backends.ts';
import { dockerBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { parsePrometheus, type Sample } from '../helpers/prometheus.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const SECRET = 'sk-observability-secret-value';
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
const FAMILIES = [
  'acp_http_requests_total',
  'acp_http_request_duration_seconds',
  'acp_revision_transitions_total',
  'acp_deploy_duration_seconds',
  'acp_webhook_deliveries_total',
  'acp_github_requests_total',
  'acp_github_outbox_pending',
  'acp_agent_heartbeat_age_seconds',
  'acp_work_pending',
  'process_cpu_seconds_total',
  'nodejs_heap_size_used_bytes',
];

function healthPortOf(server: ServerProcess): number {
  const listening = server
    .output()
    .split('\n')
    .find((line) => line.includes('"msg":"listening"'))!;
  return JSON.parse(listening).health_port;
}

async function scrape(server: ServerProcess) {
  const response = await fetch(`http://127.0.0.1:${healthPortOf(server)}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  return parsePrometheus(await response.text());
}

const sum = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((total, s) => total + s.value, 0);

/** A real server process (its own database, either backend), traffic through its API, then its /metrics and its log. */
describe('operators: /metrics, JSON logs with request ids (contract §17)', () => {
  let server: ServerProcess;
  let api: ReturnType<typeof apiClient>;
  const names: string[] = [];
  let failedId = '';
  beforeAll(async () => {
    server = await startServerProcess({ HEALTH_PORT: '0', LOG_LEVEL: 'debug', SANDBOX_STAGE_MS: '20' });
    api = apiClient(server.url, server.apiKey);
    const listeners = await api.get('/v2/listeners');
    const sandbox = listeners.body.resources.find((l: { compute_type: string }) => l.compute_type === 'sandbox').id;
    names.push(uniqueName('good'), uniqueName('bad'));
    const good = await api.post('/v2/deployments', dockerBody(names[0]!, sandbox, { secrets: [{ name: 'OPENAI_API_KEY', value: SECRET }] }), {
      'x-request-id': 'obs-create-1',
    });
    expect(good.status).toBe(201);
    expect(good.headers.get('x-request-id')).toBe('obs-create-1');
    const bad = await api.post('/v2/deployments', dockerBody(names[1]!, sandbox, { secrets: [{ name: 'SANDBOX_FAIL_STAGE', value: 'deploy' }] }));
    failedId = bad.body.id;
    await revisionReaches(api, good.body.id, good.body.latest_revision_id, ['DEPLOYED']);
    await revisionReaches(api, bad.body.id, bad.body.latest_revision_id, ['DEPLOY_FAILED']);
    // Reads through Hono and through the GET revision fast lane (the second read of a cached key), and a 404.
    for (let i = 0; i < 3; i++) expect((await api.get(`/v2/deployments/${good.body.id}/revisions/${good.body.latest_revision_id}`)).status).toBe(200);
    expect((await api.get(`/v2/deployments/${crypto.randomUUID()}`)).status).toBe(404);
    expect((await api.get('/no/such/route')).status).toBe(404);
  });
  afterAll(() => server?.kill());

  it('/metrics on the health port: every family, requests by route template, the failed deploy counted, no id, name or secret in a label', async () => {
    const { families, samples } = await scrape(server);
    for (const family of FAMILIES) expect(families.has(family), family).toBe(true);
    expect(families.get('acp_http_request_duration_seconds')).toBe('histogram');
    expect(families.get('acp_deploy_duration_seconds')).toBe('histogram');
    expect(sum(samples, 'acp_http_requests_total', { method: 'POST', route: '/v2/deployments', status: '201' })).toBe(2);
    expect(
      sum(samples, 'acp_http_requests_total', { method: 'GET', route: '/v2/deployments/:deployment_id/revisions/:revision_id', status: '200' }),
    ).toBeGreaterThanOrEqual(3);
    expect(sum(samples, 'acp_http_requests_total', { route: '/v2/deployments/:deployment_id', status: '404' })).toBe(1);
    expect(sum(samples, 'acp_http_requests_total', { route: '(unmatched)', status: '404' })).toBe(1);
    expect(sum(samples, 'acp_revision_transitions_total', { status: 'DEPLOY_FAILED' })).toBe(1);
    expect(sum(samples, 'acp_revision_transitions_total', { status: 'DEPLOYED' })).toBe(1);
    expect(sum(samples, 'acp_deploy_duration_seconds_count')).toBe(1);
    for (const sample of samples) {
      for (const value of Object.values(sample.labels)) {
        expect(value, `${sample.name} ${JSON.stringify(sample.labels)}`).not.toMatch(UUID);
        for (const secret of [SECRET, server.apiKey, ...names, failedId]) expect(value).not.toContain(secret);
        expect(value).not.toContain('/no/such/route');
      }
    }
  });

  it('every log line is one JSON object with time, level and msg; the lines of a request carry its id; no secret is logged', async () => {
    const lines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'));
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries.length).toBeGreaterThan(5);
    for (const entry of entries) {
      expect(typeof entry.time).toBe('string');
      expect(Number.isNaN(Date.parse(entry.time as string))).toBe(false);
      expect(['debug', 'info', 'warn', 'error']).toContain(entry.level);
      expect(typeof entry.msg).toBe('string');
    }
    const ofCreate = entries.filter((entry) => entry.request_id === 'obs-create-1');
    expect(ofCreate.map((entry) => entry.msg)).toContain('request answered');
    expect(ofCreate.find((entry) => entry.msg === 'request answered')).toMatchObject({ route: '/v2/deployments', status: 201 });
    // Every request has its own id: the answered lines name as many ids as requests were made.
    const answered = entries.filter((entry) => entry.msg === 'request answered');
    expect(new Set(answered.map((entry) => entry.request_id)).size).toBe(answered.length);
    expect(server.output()).not.toContain(SECRET);
    expect(server.output()).not.toContain(server.apiKey);
  });

  it('X-Request-Id: a plain token is kept, anything else replaced by a new id; a 500-free error answer carries it too', async () => {
    const kept = await api.get('/v2/deployments', { 'x-request-id': 'abc.DEF-123_4' });
    expect(kept.headers.get('x-request-id')).toBe('abc.DEF-123_4');
    const replaced = await api.get('/v2/deployments', { 'x-request-id': 'has spaces and "quotes"' });
    expect(replaced.headers.get('x-request-id')).toMatch(UUID);
    const made = await api.get(`/v2/deployments/${crypto.randomUUID()}`);
    expect(made.status).toBe(404);
    expect(made.headers.get('x-request-id')).toMatch(UUID);
  });

  it.runIf(testBackendKind() === 'postgres')('with two processes on one database: each counts its own requests, the cluster gauges agree', async () => {
    const second = await server.restart({ HEALTH_PORT: '0', LOG_LEVEL: 'info' });
    try {
      const other = apiClient(second.url, second.apiKey);
      expect((await other.get('/v2/deployments')).status).toBe(200);
      const [a, b] = await Promise.all([scrape(server), scrape(second)]);
      expect(sum(b.samples, 'acp_http_requests_total', { route: '/v2/deployments', method: 'POST' })).toBe(0);
      expect(sum(a.samples, 'acp_http_requests_total', { route: '/v2/deployments', method: 'POST' })).toBe(2);
      // The cluster gauges are read from the one database: both processes report the same values.
      const gauges = (samples: Sample[]) => JSON.stringify(samples.filter((s) => s.name === 'acp_work_pending' || s.name === 'acp_github_outbox_pending'));
      await eventually(async () => {
        const [x, y] = await Promise.all([scrape(server), scrape(second)]);
        return gauges(x.samples) === gauges(y.samples) && gauges(x.samples).includes('acp_github_outbox_pending') ? true : undefined;
      });
    } finally {
      await second.kill();
    }
  });
});
