import { DEPLOY_INPUTS, type DeployOptions, InputError, parseBoolean, parseDeployOptions } from '../shared/deploy/options.ts';

/** Inputs only the Action has (the CLI has its own ways to cancel and no GitHub Deployments). */
export const ACTION_ONLY_INPUTS = ['cancel-on-abort', 'github-deployment', 'github-token', 'github-environment', 'oidc-audience'] as const;

export type GithubDeploymentSettings = {
  token: string;
  /** GitHub environment name: the input, else the deployment's name or id. */
  environment: string;
  owner: string;
  repo: string;
  /** The commit the GitHub deployment is recorded for. */
  ref: string;
  apiUrl: string;
  /** The workflow run, shown as the deployment's log link. */
  runUrl: string | undefined;
};

export type ActionInputs = {
  deploy: DeployOptions;
  /**
   * Keyless CI: no `api-key` was given and the runner can hand out an OIDC ID token (the job has
   * `permissions: id-token: write`): the key is exchanged for one with this audience.
   */
  githubOidc: { audience: string } | null;
  cancelOnAbort: boolean;
  githubDeployment: GithubDeploymentSettings | null;
};

type Env = Record<string, string | undefined>;

/**
 * The workflow's branch, as `repo_ref` takes it: the head branch of a pull request, `refs/tags/<tag>`
 * for a tag, else the branch that triggered the run.
 */
export function workflowRef(env: Env): string | undefined {
  if (env.GITHUB_HEAD_REF) return env.GITHUB_HEAD_REF;
  if (!env.GITHUB_REF_NAME) return undefined;
  return env.GITHUB_REF_TYPE === 'tag' ? `refs/tags/${env.GITHUB_REF_NAME}` : env.GITHUB_REF_NAME;
}

/**
 * Reads and checks every input of the Action once, at the top, into one typed object. Throws
 * InputError (naming the input) before any request is made.
 */
export function readInputs(getInput: (name: string) => string, env: Env): ActionInputs {
  const keyless = getInput('api-key').trim() === '' && Boolean(env.ACTIONS_ID_TOKEN_REQUEST_URL);
  const deploy = parseDeployOptions((name) => getInput(name), { repoRef: workflowRef(env), keyFromGithubOidc: keyless });
  const githubOidc = keyless ? { audience: getInput('oidc-audience').trim() || deploy.apiUrl.replace(/\/+$/, '') } : null;
  const flag = (name: string) => (getInput(name).trim() === '' ? false : parseBoolean(getInput(name), name));
  let githubDeployment: GithubDeploymentSettings | null = null;
  if (flag('github-deployment')) {
    const token = getInput('github-token').trim();
    if (!token)
      throw new InputError('Input github-token is required when github-deployment is true (the default, github.token, needs permissions: deployments: write).');
    const [owner, repo] = (env.GITHUB_REPOSITORY ?? '').split('/');
    if (!owner || !repo || !env.GITHUB_SHA)
      throw new InputError('Input github-deployment needs a workflow run (GITHUB_REPOSITORY and GITHUB_SHA are not set).');
    const server = env.GITHUB_SERVER_URL ?? 'https://github.com';
    githubDeployment = {
      token,
      environment: getInput('github-environment').trim() || (deploy.target.kind === 'name' ? deploy.target.name : deploy.target.deploymentId),
      owner,
      repo,
      ref: env.GITHUB_SHA,
      apiUrl: env.GITHUB_API_URL ?? 'https://api.github.com',
      runUrl: env.GITHUB_RUN_ID ? `${server}/${owner}/${repo}/actions/runs/${env.GITHUB_RUN_ID}` : undefined,
    };
  }
  return { deploy, githubOidc, cancelOnAbort: flag('cancel-on-abort'), githubDeployment };
}

/** Every input name the Action reads; action.yml must declare exactly these (a test checks it). */
export const ACTION_INPUTS: readonly string[] = [...DEPLOY_INPUTS, ...ACTION_ONLY_INPUTS];
