import { readFileSync } from 'node:fs';
import { ApiClient } from '../shared/client.ts';
import { type DeployHooks, type DeployResult, deployAndWait, formatDuration, waitOnly } from '../shared/deploy/deploy.ts';
import { DEPLOY_INPUTS, type DeployInput, InputError, parseDeployOptions, parseDuration } from '../shared/deploy/options.ts';
import { ResourceName, Uuid } from '../shared/schemas/common.ts';

/** The CLI's exit codes (documented in docs/action.md). */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  timeout: 3,
  unreachable: 4,
  cancelled: 130,
} as const;

const USAGE = `Usage: node cli/main.ts <command> [flags]     (or: npm run -s cli -- <command> [flags])

Commands:
  deploy   create or update a deployment, then wait for the revision it created to be DEPLOYED
  status   show a deployment and one of its revisions (default: the latest)
  wait     wait for an existing revision (default: the latest) to end

Flags are the Action's inputs: --api-url, --api-key, --workspace-id, --deployment-id, --name, --source,
--repo-url, --integration-id, --deployment-type, --repo-ref, --graph-config-path, --build-on-push,
--image-uri, --listener-id, --k8s-namespace, --custom-url, --secrets, --resource-spec, --wait,
--wait-timeout, --poll-interval; each also read from CP_<NAME> (CP_API_URL, CP_API_KEY, CP_NAME, ...).
  --github-oidc-token <token>   instead of --api-key: a GitHub Actions OIDC ID token (CP_GITHUB_OIDC_TOKEN),
                        exchanged for a workspace key of at most an hour (docs/keyless-ci.md)
  --secret NAME=value   one secret (repeatable; added to --secrets)
  --secrets @file       a value starting with @ is read from that file (--secrets, --resource-spec)
  --revision-id <id>    status / wait: the revision (default: the deployment's latest)
  --no-wait             same as --wait false
  --retries <n>         retries of a request after 429, 5xx or a network error (default 4)
  --json                print one JSON object on stdout; progress goes to stderr

Exit codes: 0 deployed (or nothing to wait for), 1 failed (the revision failed or the API refused),
2 bad usage or inputs, 3 timed out, 4 API unreachable, 130 cancelled (SIGINT/SIGTERM).`;

type Io = { stdout: (text: string) => void; stderr: (text: string) => void };

/** Every `Warning` the server sends goes to stderr, so a field it ignored is never a silent surprise. */
function printWarning(io: Io) {
  return (event: { what: string; text: string }) => io.stderr(`warning: ${event.what}: ${event.text}`);
}

const EXTRA_FLAGS = ['revision-id', 'retries', 'secret', 'json', 'no-wait', 'help', 'github-oidc-token'] as const;

/** `--flag value`, `--flag=value`, bare `--json`; repeated `--secret`. */
export function parseArgs(argv: string[]): { command: string | undefined; flags: Map<string, string[]> } {
  const [command, ...rest] = argv;
  const flags = new Map<string, string[]>();
  const known = new Set<string>([...DEPLOY_INPUTS, ...EXTRA_FLAGS]);
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (!arg.startsWith('--')) throw new InputError(`Unexpected argument '${arg}'; flags start with --.`);
    let [name, value] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (!known.has(name)) throw new InputError(`Unknown flag --${name}.`);
    if (value === undefined) {
      if (name === 'json' || name === 'no-wait' || name === 'help') value = 'true';
      else if (i + 1 < rest.length) value = rest[++i]!;
      else throw new InputError(`Flag --${name} needs a value.`);
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { command, flags };
}

function envName(input: string): string {
  return `CP_${input.toUpperCase().replaceAll('-', '_')}`;
}

/** Flags win over CP_* variables; `@file` values are read from the file. */
function rawReader(flags: Map<string, string[]>, env: Record<string, string | undefined>) {
  return (name: DeployInput | 'revision-id' | 'retries' | 'github-oidc-token'): string | undefined => {
    let value = flags.get(name)?.at(-1) ?? env[envName(name)];
    if (name === 'wait' && flags.has('no-wait')) value = 'false';
    if (name === 'secrets') {
      const lines = [value, ...(flags.get('secret') ?? [])].filter((v): v is string => v !== undefined && v !== '');
      value = lines.length ? lines.map((v) => readAt(v, name)).join('\n') : undefined;
    } else if (name === 'resource-spec' && value !== undefined) {
      value = readAt(value, name);
    }
    return value;
  };
}

function readAt(value: string, input: string): string {
  if (!value.startsWith('@')) return value;
  try {
    return readFileSync(value.slice(1), 'utf8');
  } catch (error) {
    throw new InputError(`Input ${input}: cannot read ${value.slice(1)}: ${(error as Error).message}`);
  }
}

function exitCode(result: DeployResult): number {
  switch (result.outcome) {
    case 'deployed':
    case 'unchanged':
    case 'not-waited':
      return EXIT.ok;
    case 'timeout':
      return EXIT.timeout;
    case 'cancelled':
      return EXIT.cancelled;
    case 'failed':
      return EXIT.failed;
    case 'error':
      return result.errorKind === 'input' ? EXIT.usage : result.errorKind === 'unreachable' ? EXIT.unreachable : EXIT.failed;
  }
}

/** The machine-readable form of a result: snake_case like the API. */
export function resultJson(result: DeployResult) {
  return {
    outcome: result.outcome,
    error_kind: result.errorKind,
    deployment_id: result.deployment?.id ?? null,
    deployment_name: result.deployment?.name ?? null,
    action: result.action,
    revision_id: result.revisionId,
    status: result.status,
    url: result.url,
    reason: result.reason,
    superseded_by: result.supersededBy,
    transitions: result.transitions,
    logs: result.logs,
  };
}

function progress(io: Io): DeployHooks {
  return {
    onDeployment: (deployment, action) => io.stderr(`deployment ${deployment.name} (${deployment.id}) ${action}`),
    onRevision: (revisionId) => io.stderr(`revision ${revisionId}`),
    onStatus: (t) => io.stderr(`${t.at}  ${t.status}${t.message ? `: ${t.message}` : ''}`),
    onInfo: (message) => io.stderr(message),
  };
}

function report(io: Io, result: DeployResult, json: boolean): number {
  if (json) {
    io.stdout(JSON.stringify(resultJson(result)));
  } else {
    for (const line of result.logs.build) io.stderr(`[build] ${line.timestamp} ${line.message}`);
    for (const line of result.logs.deploy) io.stderr(`[deploy] ${line.timestamp} ${line.message}`);
    const what = result.outcome === 'deployed' ? `DEPLOYED${result.url ? ` ${result.url}` : ''}` : result.outcome;
    io.stdout(`${what}${result.revisionId ? ` revision=${result.revisionId}` : ''}${result.deployment ? ` deployment=${result.deployment.id}` : ''}`);
    if (result.reason) io.stderr(result.reason);
  }
  return exitCode(result);
}

/** Keyless CI: the GitHub Actions OIDC ID token exchanged for a short-lived workspace key (never printed). */
async function keyFromGithubOidc(
  token: string,
  apiUrl: string,
  workspaceId: string | undefined,
  retries: number,
  io: Io,
  signal?: AbortSignal,
): Promise<string> {
  const exchanger = new ApiClient({ baseUrl: apiUrl, apiKey: '', retries, userAgent: 'agent-deploy-cli', onWarning: printWarning(io) });
  const minted = await exchanger.exchangeGithubToken(token, workspaceId, signal);
  io.stderr(`exchanged the GitHub OIDC token for key ${minted.key_id} of workspace ${minted.workspace_id}, valid until ${minted.expires_at}`);
  return minted.api_key;
}

/** Runs one CLI command; answers the exit code. */
export async function main(argv: string[], env: Record<string, string | undefined>, io: Io, signal?: AbortSignal): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    io.stderr(`${(error as Error).message}\n\n${USAGE}`);
    return EXIT.usage;
  }
  const { command, flags } = parsed;
  if (flags.has('help') || command === 'help' || command === '--help' || command === undefined) {
    io.stdout(USAGE);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  const json = flags.has('json');
  const raw = rawReader(flags, env);
  try {
    const retries = raw('retries') === undefined ? 4 : Number(raw('retries'));
    if (!Number.isInteger(retries) || retries < 0) throw new InputError('Flag --retries must be a whole number, 0 or more.');
    const oidcToken = raw('github-oidc-token')?.trim() || undefined;
    if (oidcToken && raw('api-key')?.trim()) throw new InputError('Give one of --api-key or --github-oidc-token, not both.');
    if (command === 'deploy') {
      const options = parseDeployOptions(raw, { keyFromGithubOidc: oidcToken !== undefined });
      if (oidcToken) options.apiKey = await keyFromGithubOidc(oidcToken, options.apiUrl, options.workspaceId, retries, io, signal);
      const client = new ApiClient({
        baseUrl: options.apiUrl,
        apiKey: options.apiKey,
        workspaceId: options.workspaceId,
        retries,
        userAgent: 'agent-deploy-cli',
        onRetry: (e) => io.stderr(`${e.what}: ${e.reason}; retry ${e.attempt} in ${formatDuration(e.delayMs)}`),
        onWarning: printWarning(io),
      });
      return report(io, await deployAndWait(client, options, progress(io), signal), json);
    }
    if (command === 'status' || command === 'wait') {
      const apiUrl = raw('api-url');
      if (!apiUrl) throw new InputError('Input api-url is required (--api-url or CP_API_URL).');
      if (!raw('api-key') && !oidcToken) throw new InputError('Input api-key is required (--api-key or CP_API_KEY), or --github-oidc-token.');
      const apiKey = oidcToken ? await keyFromGithubOidc(oidcToken, apiUrl, raw('workspace-id'), retries, io, signal) : raw('api-key')!;
      const deploymentId = raw('deployment-id');
      const name = raw('name');
      if (!deploymentId === !name) throw new InputError('Give one of --deployment-id or --name.');
      if (deploymentId && !Uuid.safeParse(deploymentId).success) throw new InputError(`Input deployment-id must be a UUID; got '${deploymentId}'.`);
      if (name && !ResourceName.safeParse(name).success) throw new InputError(`Input name is not a valid deployment name: '${name}'.`);
      const revisionFlag = raw('revision-id');
      if (revisionFlag && !Uuid.safeParse(revisionFlag).success) throw new InputError(`Input revision-id must be a UUID; got '${revisionFlag}'.`);
      const client = new ApiClient({
        baseUrl: apiUrl,
        apiKey,
        workspaceId: raw('workspace-id'),
        retries,
        userAgent: 'agent-deploy-cli',
        onWarning: printWarning(io),
      });
      const deployment = deploymentId ? await client.getDeployment(deploymentId, signal) : await client.findDeploymentByName(name!, signal);
      if (!deployment) {
        io.stderr(`No deployment is named ${name}.`);
        return EXIT.failed;
      }
      const revisionId = revisionFlag ?? deployment.latest_revision_id;
      if (!revisionId) {
        io.stderr(`Deployment ${deployment.name} has no revision.`);
        return EXIT.failed;
      }
      if (command === 'status') {
        const { revision } = await client.getRevision(deployment.id, revisionId, signal);
        if (json) io.stdout(JSON.stringify({ deployment, revision }));
        else
          io.stdout(
            `deployment ${deployment.name} (${deployment.id}) ${deployment.status}; revision ${revision.id} ${revision.status}${revision.status_message ? `: ${revision.status_message}` : ''}`,
          );
        return EXIT.ok;
      }
      const options = {
        waitTimeoutMs: parseDuration(raw('wait-timeout') ?? '30m', 'wait-timeout'),
        pollIntervalMs: parseDuration(raw('poll-interval') ?? '2s', 'poll-interval'),
      };
      return report(io, await waitOnly(client, { deploymentId: deployment.id, revisionId }, options, progress(io), signal), json);
    }
    io.stderr(`Unknown command '${command}'.\n\n${USAGE}`);
    return EXIT.usage;
  } catch (error) {
    if (error instanceof InputError) {
      io.stderr(error.message);
      return EXIT.usage;
    }
    if (signal?.aborted) return EXIT.cancelled;
    const name = (error as Error).name;
    io.stderr((error as Error).message);
    return name === 'TransientError' ? EXIT.unreachable : EXIT.failed;
  }
}

if (import.meta.main) {
  const controller = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => controller.abort(new Error(`cancelled by ${signal}`)));
  const code = await main(process.argv.slice(2), process.env, { stdout: (t) => console.log(t), stderr: (t) => console.error(t) }, controller.signal);
  process.exit(code);
}
