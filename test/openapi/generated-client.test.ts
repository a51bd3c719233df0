import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { REDOCLY, runCli } from './tools.ts';

/**
 * A client generated from the served document (Redocly's TypeScript generator) type-checks under
 * `tsc --strict` together with a script written against it, and that script drives a real server
 * through it: the document is one clients can be generated from and used with.
 */
describe('a TypeScript client generated from the served document', () => {
  let server: ServerProcess;
  let dir: string;

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50', PUBLIC_URL: 'https://control-plane.test' });
    dir = mkdtempSync(join(tmpdir(), 'cp-client-'));
    writeFileSync(join(dir, 'openapi.json'), await (await fetch(`${server.url}/openapi.json`)).text());
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('is generated, type-checks with a script that uses it, and runs that script against the server', async () => {
    const generated = await runCli(REDOCLY, [
      'generate-client',
      join(dir, 'openapi.json'),
      '-o',
      join(dir, 'client.ts'),
      '--import-ext',
      'ts',
      '--error-mode',
      'result',
    ]);
    expect(generated.code, generated.stderr + generated.stdout).toBe(0);

    // Written against the generated names and types: operationIds, named components, the ETag header.
    writeFileSync(
      join(dir, 'flow.ts'),
      `import { configure, list_listeners_v2_listeners_get, create_deployment_v2_deployments_post, get_deployment_v2_deployments__deployment_id__get,
  get_revision_v2_deployments__deployment_id__revisions__revision_id__get, list_revisions_v2_deployments__deployment_id__revisions_get,
  delete_deployment_v2_deployments__deployment_id__delete, type Deployment } from './client.ts';

configure({ serverUrl: ${JSON.stringify(server.url)}, auth: { apiKey: { ApiKey: ${JSON.stringify(server.apiKey)} } } });
const out: Record<string, unknown> = {};
const listeners = await list_listeners_v2_listeners_get({ query: { limit: 10 } });
if (listeners.error) throw new Error('listeners: ' + JSON.stringify(listeners.error));
const listenerId: string = listeners.data.resources[0]!.id;
const created = await create_deployment_v2_deployments_post({ body: {
  name: 'generated-' + Date.now().toString(36), source: 'external_docker',
  source_config: { listener_id: listenerId }, source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
} });
if (created.error) throw new Error('create: ' + JSON.stringify(created.error));
const deployment: Deployment = created.data;
out.created = created.response.status;
const read = await get_deployment_v2_deployments__deployment_id__get({ path: { deployment_id: deployment.id } });
out.readName = read.data?.name === deployment.name;
const revisionId: string = deployment.latest_revision_id!;
const revision = await get_revision_v2_deployments__deployment_id__revisions__revision_id__get({ path: { deployment_id: deployment.id, revision_id: revisionId } });
out.etag = revision.response.headers.get('etag');
const held = await get_revision_v2_deployments__deployment_id__revisions__revision_id__get({
  path: { deployment_id: deployment.id, revision_id: revisionId }, headers: { 'If-None-Match': '*', Prefer: 'wait=0' } });
out.conditional = held.response.status;
const revisions = await list_revisions_v2_deployments__deployment_id__revisions_get({ path: { deployment_id: deployment.id } });
out.newest = revisions.data?.resources[0]?.id === revisionId;
const missing = await get_deployment_v2_deployments__deployment_id__get({ path: { deployment_id: '00000000-0000-4000-8000-000000000000' } });
out.missing = [missing.response.status, missing.error && 'detail' in missing.error ? typeof missing.error.detail : null];
const deleted = await delete_deployment_v2_deployments__deployment_id__delete({ path: { deployment_id: deployment.id } });
out.deleted = deleted.response.status;
console.log(JSON.stringify(out));
`,
    );
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'es2022',
          module: 'esnext',
          moduleResolution: 'bundler',
          allowImportingTsExtensions: true,
          lib: ['es2022', 'dom'],
          types: [],
          skipLibCheck: true,
        },
        files: ['client.ts', 'flow.ts'],
      }),
    );
    const typecheck = await runCli('typescript/bin/tsc', ['-p', join(dir, 'tsconfig.json')]);
    expect(typecheck.stdout + typecheck.stderr).toBe('');
    expect(typecheck.code).toBe(0);

    const run = await runNode(join(dir, 'flow.ts'));
    expect(run.code, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(out).toEqual({
      created: 201,
      readName: true,
      etag: expect.stringMatching(/^"/),
      conditional: 304,
      newest: true,
      missing: [404, 'string'],
      deleted: 204,
    });
  });
});

function runNode(file: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
