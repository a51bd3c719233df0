import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, pushPayload, revisionsOf, sha } from '../webhooks/github.ts';
import { linkThroughSetup } from './link.ts';
import { serverSql } from './sql.ts';
import { GithubStandIn } from './stand-in.ts';

export type GithubScene = { github: GithubStandIn; server: ServerProcess; api: Api; installation: number; integrationId: string };

/**
 * What the GitHub tests start from: the stand-in with the organization `acme` (id 501) installed
 * on `repos` (alice a member, `permissions` the stand-in's defaults unless given), a real server
 * process using it (`env` after the stand-in's settings), and the installation linked to the
 * default workspace the way a user does it (the setup URL).
 */
export async function startGithubScene(options: { repos: string[]; env: Record<string, string>; permissions?: Record<string, string> }): Promise<GithubScene> {
  const github = await new GithubStandIn().start();
  const installation = github.install({ login: 'acme', id: 501, type: 'Organization' }, options.repos, ['alice'], options.permissions);
  const server = await startServerProcess({ ...github.serverEnv(), ...options.env });
  const api = apiClient(server.url, server.apiKey);
  const integrationId = await linkThroughSetup(server.url, api, github, installation, 'alice');
  return { github, server, api, installation, integrationId };
}

/** Waits until the server's GitHub outbox has nothing left to send (read from its database). */
export async function outboxDrained(server: ServerProcess): Promise<void> {
  const sql = serverSql(server);
  try {
    await eventually(
      async () =>
        Number((await sql.all<{ n: number | string }>('SELECT count(*) AS n FROM github_outbox WHERE done_at IS NULL'))[0]!.n) === 0 ? true : undefined,
      60_000,
      100,
    );
  } finally {
    await sql.close();
  }
}

/**
 * A `github` deployment of `acme/<repo>` on the stand-in that builds on push, created and waited
 * for until its first revision settles (the sandbox data plane builds nothing). Answers the create's body.
 */
export async function createBuiltOnPush(
  scene: Pick<GithubScene, 'api' | 'github' | 'integrationId'>,
  name: string,
  repo: string,
  options: { ref?: string; secrets?: Array<{ name: string; value: string }>; deploymentType?: string } = {},
): Promise<{ id: string; name: string; source_config: { custom_url: string } }> {
  const { api, github, integrationId } = scene;
  const created = await api.post(
    '/v2/deployments',
    githubBody(name, integrationId, {
      source_config: {
        integration_id: integrationId,
        repo_url: `${github.url}/${repo}`,
        deployment_type: options.deploymentType ?? 'dev',
        build_on_push: true,
      },
      source_revision_config: { repo_ref: options.ref ?? 'main', graph_config_path: 'langgraph.json' },
      secrets: options.secrets ?? [],
    }),
  );
  if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED'], 30_000);
  return created.body;
}

/**
 * A signed push of a new commit to `acme/<repo>` (on `ref`), and the revision it made for the
 * deployment. Answers the commit and that revision.
 */
export async function pushCommit(
  scene: Pick<GithubScene, 'api' | 'github' | 'installation' | 'server'>,
  secret: string,
  deploymentId: string,
  repo: string,
  ref = 'refs/heads/main',
): Promise<{ after: string; revision: { id: string; [field: string]: unknown } }> {
  const { api, github, installation, server } = scene;
  const after = sha();
  const payload = pushPayload({ repo, after, ref, htmlUrl: `${github.url}/${repo}`, installationId: installation });
  const delivered = await deliver(server.url, 'push', payload, { secret });
  if (delivered.status !== 202) throw new Error(`push: ${delivered.status} ${JSON.stringify(delivered.body)}`);
  const revision = await eventually(async () => (await revisionsOf(api, deploymentId)).find((r) => r.source_revision_config.repo_commit_sha === after), 20_000);
  return { after, revision };
}
