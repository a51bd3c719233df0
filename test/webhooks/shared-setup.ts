import { expect } from 'vitest';
import type { Api } from '../helpers/api.ts';
import { githubBody, uniqueName } from '../helpers/fixtures.ts';

/** A `github` deployment with `build_on_push: true` on `main` of `repoUrl`. */
export async function pushDeployment(api: Api, integrationId: string, repoUrl: string, ref = 'main') {
  const created = await api.post(
    '/v2/deployments',
    githubBody(uniqueName('push'), integrationId, {
      source_config: { integration_id: integrationId, repo_url: repoUrl, deployment_type: 'dev', build_on_push: true },
      source_revision_config: { repo_ref: ref, graph_config_path: 'langgraph.json' },
    }),
  );
  expect(created.status).toBe(201);
  return created.body as { id: string; latest_revision_id: string };
}
