import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { ROOT } from './harness.ts';

describe('the CLI from a shell script', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50' });
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('deploys, patches, reports status, fails, waits, times out, and exits with the documented codes', async () => {
    const api = apiClient(server.url, server.apiKey);
    const k8s = await api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `cluster-${crypto.randomUUID()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    expect(k8s.status).toBe(201);
    // Two listeners now, so a create must name one: CP_LISTENER_ID (the sandbox) does, and --listener-id wins over it for the k8s deploy.
    const sandbox = (await api.get('/v2/listeners')).body.resources.find((l: { compute_type: string }) => l.compute_type === 'sandbox');
    const result = spawnSync('bash', [join(ROOT, 'test/action/cli-flow.sh')], {
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        NODE: process.execPath,
        CP_API_URL: server.url,
        CP_API_KEY: server.apiKey,
        CP_LISTENER_ID: sandbox.id,
        NAME: uniqueName('cli'),
        K8S_LISTENER: k8s.body.id,
      },
    });
    expect(result.stderr + result.stdout).toContain('ALL OK');
    expect(result.status).toBe(0);
  });
});
