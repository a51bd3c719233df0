import { describe, expect, it } from 'vitest';
import { publicRevision } from '../../server/domain/revisions.ts';
import { newRequestId } from '../../server/http/request-id.ts';
import { revisionJson, storedRevisionJson } from '../../server/http/revision-answer.ts';
import { Metrics } from '../../server/metrics.ts';
import { toRevision } from '../../server/store/rows.ts';

// The pieces the GET revision lane was made cheaper with, each checked against what it replaced.

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newRequestId', () => {
  it('makes version-4 UUIDs as crypto.randomUUID does, none twice, across many draws of random bytes', () => {
    const ids = new Set<string>();
    // 256 ids per draw: this crosses forty draws.
    for (let i = 0; i < 10_000; i += 1) {
      const id = newRequestId();
      expect(id).toMatch(UUID_V4);
      ids.add(id);
    }
    expect(ids.size).toBe(10_000);
  });

  it('uses every hex digit in every free position (the bytes are random, not a counter)', () => {
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 2_000; i += 1) [...newRequestId()].forEach((char, at) => seen[at]!.add(char));
    const fixed = new Map([
      [8, 1],
      [13, 1],
      [14, 1],
      [18, 1],
      [19, 4],
      [23, 1],
    ]);
    seen.forEach((chars, at) => expect(chars.size, `position ${at}`).toBe(fixed.get(at) ?? 16));
  });
});

describe('storedRevisionJson', () => {
  it('is byte for byte the JSON of publicRevision for a record the store mapped, old partial configs and awkward text included', () => {
    const rows = [
      { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      { repo_ref: 'main', graph_config_path: 'langgraph.json', langgraph_config_path: 'other.json', image_uri: 'img', repo_commit_sha: 'a'.repeat(40) },
      {},
    ].map((config, i) => ({
      id: crypto.randomUUID(),
      deployment_id: crypto.randomUUID(),
      tenant_id: crypto.randomUUID(),
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:01.000Z',
      status: 'BUILDING',
      status_message: i === 0 ? null : 'a "quoted" \\ message, ünïcode, \u2028 and \u0001',
      source: 'github',
      source_revision_config: JSON.stringify(config),
      secrets: 'v1:sealed',
      trigger: 'push',
      version: 3,
    }));
    for (const row of rows) {
      const record = toRevision(row);
      expect(storedRevisionJson(record)).toBe(JSON.stringify(publicRevision(record)));
      expect(storedRevisionJson(record)).toBe(revisionJson(record));
    }
  });
});

describe('Metrics.httpAnswered', () => {
  const counted = async (metrics: Metrics) =>
    (await metrics.text()).body
      .split('\n')
      .filter((line) => line.startsWith('acp_http_requests_total{'))
      .sort();

  it('counts each route apart when answers of several routes alternate, and starts again after a reset', async () => {
    const metrics = new Metrics({ githubOutboxPending: async () => 0, agentHeartbeats: async () => [], workPending: async () => [] });
    for (let i = 0; i < 3; i += 1) {
      metrics.httpAnswered('GET', '/a', 200, 0.001);
      metrics.httpAnswered('GET', '/a', 200, 0.001);
      metrics.httpAnswered('POST', '/a', 201, 0.002);
      metrics.httpAnswered('GET', '/b', 404, 0.003);
    }
    expect(await counted(metrics)).toEqual([
      'acp_http_requests_total{method="GET",route="/a",status="200"} 6',
      'acp_http_requests_total{method="GET",route="/b",status="404"} 3',
      'acp_http_requests_total{method="POST",route="/a",status="201"} 3',
    ]);
    metrics.registry.resetMetrics();
    metrics.httpAnswered('GET', '/a', 200, 0.001);
    expect(await counted(metrics)).toEqual(['acp_http_requests_total{method="GET",route="/a",status="200"} 1']);
    expect((await metrics.text()).body).toContain('acp_http_request_duration_seconds_bucket{le="0.001",method="GET",route="/a"} 1');
  });

  it('counts each status of one route apart when statuses alternate (the last one is kept at hand)', async () => {
    const metrics = new Metrics({ githubOutboxPending: async () => 0, agentHeartbeats: async () => [], workPending: async () => [] });
    for (const status of [200, 200, 304, 200, 304, 304, 404, 200]) metrics.httpAnswered('GET', '/a', status, 0.001);
    expect(await counted(metrics)).toEqual([
      'acp_http_requests_total{method="GET",route="/a",status="200"} 4',
      'acp_http_requests_total{method="GET",route="/a",status="304"} 3',
      'acp_http_requests_total{method="GET",route="/a",status="404"} 1',
    ]);
    expect((await metrics.text()).body).toContain('acp_http_request_duration_seconds_count{method="GET",route="/a"} 8');
  });
});
