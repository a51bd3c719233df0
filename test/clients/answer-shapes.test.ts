import { describe, expect, it } from 'vitest';
import { Deployment, DeploymentCreate, DeploymentPatch } from '../../shared/schemas/deployment.ts';
import { Listener } from '../../shared/schemas/listener.ts';
import { Revision } from '../../shared/schemas/revision.ts';

const oldRevisionConfig = { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null, repo_commit_sha: null };
const oldDeployment = {
  id: '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f',
  tenant_id: '4f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f',
  name: 'agent',
  source: 'github',
  source_config: {
    integration_id: null,
    repo_url: 'https://github.com/a/b',
    deployment_type: 'dev',
    build_on_push: false,
    custom_url: null,
    resource_spec: null,
    listener_id: null,
    listener_config: null,
    install_command: null,
    build_command: null,
  },
  source_revision_config: oldRevisionConfig,
  secrets: [],
  created_at: '2026-11-22T10:00:00.000Z',
  updated_at: '2026-11-22T10:00:00.000Z',
  status: 'READY',
  latest_revision_id: null,
  active_revision_id: null,
  image_version: null,
};

/** The project's client reads answers with these schemas: both a server before this change and after. */
describe('answer shapes the project client reads', () => {
  it('an answer of a server that predates langgraph_config_path, source_tarball_path and listener version still parses', () => {
    const deployment = Deployment.parse(oldDeployment);
    expect(deployment.source_revision_config).toMatchObject({ graph_config_path: 'langgraph.json', langgraph_config_path: null, source_tarball_path: null });
    const revision = Revision.parse({
      id: oldDeployment.id,
      deployment_id: oldDeployment.id,
      created_at: oldDeployment.created_at,
      updated_at: oldDeployment.updated_at,
      status: 'DEPLOYED',
      status_message: null,
      source: 'github',
      source_revision_config: oldRevisionConfig,
      trigger: 'create',
    });
    expect(revision.source_revision_config.source_tarball_path).toBeNull();
    const listener = Listener.parse({
      id: oldDeployment.id,
      tenant_id: oldDeployment.tenant_id,
      compute_type: 'sandbox',
      compute_id: 'sandbox',
      compute_config: { k8s_namespaces: [] },
      created_at: oldDeployment.created_at,
      updated_at: oldDeployment.updated_at,
    });
    expect(listener.version).toBeNull();
  });

  it('an answer with the hosted sources and both config path names parses', () => {
    const deployment = Deployment.parse({
      ...oldDeployment,
      name: 'my_deployment',
      source: 'internal_source',
      source_revision_config: {
        ...oldRevisionConfig,
        repo_ref: null,
        langgraph_config_path: 'langgraph.json',
        source_tarball_path: 'deployments/x/uploads/y.tar.gz',
      },
    });
    expect(deployment.source).toBe('internal_source');
    expect(Deployment.safeParse({ ...oldDeployment, source: 'gitlab' }).success).toBe(false);
  });

  it('request schemas fold langgraph_config_path into graph_config_path', () => {
    const patch = DeploymentPatch.parse({ source_revision_config: { langgraph_config_path: 'g.json' } });
    expect(patch.source_revision_config).toEqual({ graph_config_path: 'g.json' });
    const create = DeploymentCreate.parse({ name: 'a', source: 'internal_source', source_revision_config: { langgraph_config_path: 'g.json' } });
    expect(create.source === 'internal_source' && create.source_revision_config).toEqual({ graph_config_path: 'g.json' });
  });
});
