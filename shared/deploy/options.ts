import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ResourceName, Uuid } from '../schemas/common.ts';
import { DeploymentType, isTagRef, RepoRef, RepoUrl, type Source } from '../schemas/deployment.ts';

/** The sources this client can create: the two others are made by `langgraph deploy` (upload or push first). */
const CreatableSource = z.enum(['github', 'external_docker']);

import { ResourceSpec } from '../schemas/resource-spec.ts';
import { SECRET_NAME, type Secret } from '../schemas/secret.ts';

/** An input that is missing, malformed or in conflict with another; the message names the input. */
export class InputError extends Error {
  override readonly name = 'InputError';
}

/** Every input the deploy core reads, in kebab-case (the Action's names; the CLI's flags). */
export const DEPLOY_INPUTS = [
  'api-url',
  'api-key',
  'workspace-id',
  'deployment-id',
  'name',
  'source',
  'repo-url',
  'integration-id',
  'deployment-type',
  'repo-ref',
  'graph-config-path',
  'build-on-push',
  'image-uri',
  'listener-id',
  'k8s-namespace',
  'custom-url',
  'secrets',
  'resource-spec',
  'wait',
  'wait-timeout',
  'poll-interval',
] as const;
export type DeployInput = (typeof DEPLOY_INPUTS)[number];

/** Inputs that only one source takes (the seed's "Applies to" column). */
const GITHUB_ONLY: readonly DeployInput[] = ['repo-url', 'integration-id', 'deployment-type', 'repo-ref', 'graph-config-path', 'build-on-push'];
const DOCKER_ONLY: readonly DeployInput[] = ['image-uri', 'listener-id', 'k8s-namespace', 'custom-url', 'resource-spec'];

export type DeployTarget = { kind: 'id'; deploymentId: string } | { kind: 'name'; name: string };

/** Everything one deploy needs, checked. Fields left undefined were not given. */
export type DeployOptions = {
  apiUrl: string;
  apiKey: string;
  workspaceId: string | undefined;
  target: DeployTarget;
  /** Given or inferred from the source-specific inputs; undefined only with a deployment id. */
  source: Source | undefined;
  repoUrl: string | undefined;
  integrationId: string | undefined;
  deploymentType: DeploymentType | undefined;
  repoRef: string | undefined;
  /** Used when `repoRef` is not given and the deployment's source is `github` (the workflow's branch). */
  defaultRepoRef: string | undefined;
  graphConfigPath: string | undefined;
  buildOnPush: boolean | undefined;
  imageUri: string | undefined;
  listenerId: string | undefined;
  k8sNamespace: string | undefined;
  customUrl: string | undefined;
  secrets: Secret[] | undefined;
  resourceSpec: ResourceSpec | undefined;
  wait: boolean;
  waitTimeoutMs: number;
  pollIntervalMs: number;
};

/** Reads one raw input; '' and undefined both mean "not given". */
export type RawInputs = (name: DeployInput) => string | undefined;

const DEFAULT_WAIT_TIMEOUT = '30m';
const DEFAULT_POLL_INTERVAL = '2s';

/**
 * `"90s"`, `"30m"`, `"1h"`, `"1h30m"`, `"500ms"` or a bare number of seconds, as milliseconds.
 * Throws InputError naming `input` otherwise.
 */
export function parseDuration(value: string, input: string): number {
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) {
    throw new InputError(`Input ${input} must be a duration such as 90s, 30m or 1h (or a number of seconds); got '${value}'.`);
  }
  return Math.round(parts.reduce((sum, [, amount, u]) => sum + Number(amount) * unit[u!]!, 0));
}

/** YAML 1.2 core booleans, as `core.getBooleanInput` takes them. */
export function parseBoolean(value: string, input: string): boolean {
  if (['true', 'True', 'TRUE'].includes(value.trim())) return true;
  if (['false', 'False', 'FALSE'].includes(value.trim())) return false;
  throw new InputError(`Input ${input} must be true or false; got '${value}'.`);
}

/**
 * `NAME=value` lines. Blank lines and lines starting with `#` are skipped; the value is everything
 * after the first `=`, kept as it is (it may contain `=` and spaces).
 */
export function parseSecrets(text: string, input = 'secrets'): Secret[] {
  const secrets: Secret[] = [];
  const seen = new Set<string>();
  text.split(/\r?\n/).forEach((line, index) => {
    if (line.trim() === '' || line.trim().startsWith('#')) return;
    const eq = line.indexOf('=');
    // Never echo the line: it may hold a secret value.
    if (eq < 0) throw new InputError(`Input ${input}, line ${index + 1}: expected NAME=value.`);
    const name = line.slice(0, eq).trim();
    if (!SECRET_NAME.test(name)) throw new InputError(`Input ${input}, line ${index + 1}: the name '${name}' must be a C identifier ([A-Za-z_][A-Za-z0-9_]*).`);
    if (seen.has(name)) throw new InputError(`Input ${input}: the secret ${name} is given twice.`);
    seen.add(name);
    secrets.push({ name, value: line.slice(eq + 1) });
  });
  return secrets;
}

/** A ResourceSpec written as JSON or YAML (JSON is YAML), checked with the API's own schema. */
export function parseResourceSpec(text: string, input = 'resource-spec'): ResourceSpec {
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (error) {
    throw new InputError(`Input ${input} is neither JSON nor YAML: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
  }
  const parsed = ResourceSpec.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InputError(`Input ${input}${issue.path.length ? ` (${issue.path.join('.')})` : ''}: ${issue.message}`);
  }
  return parsed.data;
}

function check<T>(schema: z.ZodType<T>, value: string | undefined, input: string, what: string): T | undefined {
  if (value === undefined) return undefined;
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new InputError(`Input ${input} must be ${what}; got '${value}'.`);
  return parsed.data;
}

/**
 * Reads and checks every deploy input once. Conflicting or missing inputs throw InputError, with a
 * sentence that names the input, before any request is made.
 */
export function parseDeployOptions(raw: RawInputs, defaults: { repoRef?: string | undefined; keyFromGithubOidc?: boolean } = {}): DeployOptions {
  const get = (name: DeployInput): string | undefined => {
    const value = raw(name);
    return value === undefined || value.trim() === '' ? undefined : name === 'secrets' || name === 'resource-spec' ? value : value.trim();
  };
  const given = (name: DeployInput) => get(name) !== undefined;

  const apiUrl = get('api-url');
  if (!apiUrl) throw new InputError('Input api-url is required: the address of the control-plane API, e.g. https://deploy.example.com.');
  check(z.url({ protocol: /^https?$/ }), apiUrl, 'api-url', 'an http(s) URL');
  // Keyless CI: the key is minted from a GitHub Actions OIDC token after the inputs are checked ('' until then).
  const apiKey = get('api-key') ?? (defaults.keyFromGithubOidc ? '' : undefined);
  if (apiKey === undefined) {
    throw new InputError(
      'Input api-key is required: an API key of the control plane (keep it in a repository secret), unless the job may request a GitHub OIDC token (permissions: id-token: write) from a workspace that trusts the repository.',
    );
  }

  const deploymentId = check(Uuid, get('deployment-id'), 'deployment-id', 'a deployment id (a UUID)');
  const name = check(ResourceName, get('name'), 'name', '1-63 characters of letters, digits, - and _, starting with a letter or digit');
  if (deploymentId && name)
    throw new InputError('Inputs deployment-id and name are both set: give one of them (name finds, or creates, the deployment with that name).');
  if (!deploymentId && !name)
    throw new InputError(
      'Input name or deployment-id is required: name creates the deployment or updates the one with that name; deployment-id updates an existing one.',
    );
  const target: DeployTarget = deploymentId ? { kind: 'id', deploymentId } : { kind: 'name', name: name! };

  // The source: as given, else what the source-specific inputs imply.
  let source = check(CreatableSource, get('source'), 'source', 'github or external_docker');
  const githubInputs = GITHUB_ONLY.filter(given);
  const dockerInputs = DOCKER_ONLY.filter(given);
  if (source === 'github' && dockerInputs.length) throw new InputError(`Input ${dockerInputs[0]} applies to source external_docker, but source is github.`);
  if (source === 'external_docker' && githubInputs.length)
    throw new InputError(`Input ${githubInputs[0]} applies to source github, but source is external_docker.`);
  if (!source && githubInputs.length && dockerInputs.length) {
    throw new InputError(
      `Inputs ${githubInputs[0]} (source github) and ${dockerInputs[0]} (source external_docker) cannot be used together; set source to say which one you mean.`,
    );
  }
  source ??= githubInputs.length ? 'github' : dockerInputs.length ? 'external_docker' : undefined;

  const repoRef = check(RepoRef, get('repo-ref'), 'repo-ref', 'a branch name or refs/tags/<tag>');
  const buildOnPush = given('build-on-push') ? parseBoolean(get('build-on-push')!, 'build-on-push') : undefined;
  const defaultRepoRef = defaults.repoRef && RepoRef.safeParse(defaults.repoRef).success ? defaults.repoRef : undefined;
  const effectiveRef = repoRef ?? (source === 'github' ? defaultRepoRef : undefined);
  if (buildOnPush === true && isTagRef(effectiveRef)) {
    throw new InputError(`Input build-on-push cannot be true when repo-ref is a tag (${effectiveRef}); push events only follow branches.`);
  }

  const options: DeployOptions = {
    apiUrl,
    apiKey,
    workspaceId: check(Uuid, get('workspace-id'), 'workspace-id', 'a workspace id (a UUID)'),
    target,
    source,
    repoUrl: get('repo-url'),
    integrationId: check(Uuid, get('integration-id'), 'integration-id', 'an integration id (a UUID)'),
    deploymentType: check(DeploymentType, get('deployment-type'), 'deployment-type', 'one of dev_free, dev, prod'),
    repoRef,
    defaultRepoRef,
    graphConfigPath: get('graph-config-path'),
    buildOnPush,
    imageUri: check(z.string().regex(/^\S+$/), get('image-uri'), 'image-uri', 'an image reference without white space'),
    listenerId: check(Uuid, get('listener-id'), 'listener-id', 'a listener id (a UUID)'),
    k8sNamespace: check(
      z
        .string()
        .max(63)
        .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
      get('k8s-namespace'),
      'k8s-namespace',
      'a Kubernetes namespace (a DNS label)',
    ),
    customUrl: check(z.url({ protocol: /^https?$/ }), get('custom-url'), 'custom-url', 'an http(s) URL'),
    secrets: given('secrets') ? parseSecrets(get('secrets')!) : undefined,
    resourceSpec: given('resource-spec') ? parseResourceSpec(get('resource-spec')!) : undefined,
    wait: parseBoolean(get('wait') ?? 'true', 'wait'),
    waitTimeoutMs: parseDuration(get('wait-timeout') ?? DEFAULT_WAIT_TIMEOUT, 'wait-timeout'),
    pollIntervalMs: parseDuration(get('poll-interval') ?? DEFAULT_POLL_INTERVAL, 'poll-interval'),
  };
  if (options.repoUrl !== undefined) check(RepoUrl, options.repoUrl, 'repo-url', 'a git URL (https://host/owner/repo or git@host:owner/repo)');
  if (options.waitTimeoutMs <= 0) throw new InputError('Input wait-timeout must be more than 0.');
  if (options.pollIntervalMs < 100) throw new InputError('Input poll-interval must be at least 100ms.');

  // With a name the step may have to create the deployment, so what a create needs must be there.
  if (target.kind === 'name') {
    if (!source)
      throw new InputError(`Input source is required with name (github or external_docker), since the deployment ${target.name} may have to be created.`);
    if (source === 'github') {
      if (!options.repoUrl) throw new InputError('Input repo-url is required for source github (the deployment may have to be created).');
      if (!options.graphConfigPath) throw new InputError('Input graph-config-path is required for source github (e.g. langgraph.json).');
      if (!effectiveRef)
        throw new InputError(
          'Input repo-ref is required for source github outside a workflow run (in a workflow it defaults to the branch that triggered it).',
        );
    } else if (!options.imageUri) {
      throw new InputError('Input image-uri is required for source external_docker.');
    }
  }
  return options;
}
