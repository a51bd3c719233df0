import * as actionsCore from '@actions/core';
import { ApiClient } from '../shared/client.ts';
import { type DeployResult, deployAndWait, formatDuration } from '../shared/deploy/deploy.ts';
import { InputError } from '../shared/deploy/options.ts';
import { isTerminal } from '../shared/schemas/revision.ts';
import { GithubDeploymentReporter } from './github-deployment.ts';
import { type ActionInputs, type GithubDeploymentSettings, readInputs } from './inputs.ts';
import { renderSummary, type Summary } from './summary.ts';

/** The part of `@actions/core` the Action uses. */
export type ActionCore = {
  getInput(name: string): string;
  setOutput(name: string, value: string): void;
  setFailed(message: string): void;
  setSecret(secret: string): void;
  /** The runner's OIDC ID token for `audience` (masked by the runner client itself). */
  getIDToken(audience?: string): Promise<string>;
  info(message: string): void;
  warning(message: string): void;
  error(message: string, properties?: { title?: string }): void;
  startGroup(name: string): void;
  endGroup(): void;
  summary: Summary & { write(): Promise<unknown>; emptyBuffer(): unknown };
};

/** Where cancellation comes from: the runner sends SIGINT, then SIGTERM, then kills. */
export type SignalSource = { once(signal: 'SIGINT' | 'SIGTERM', listener: () => void): unknown };

export type ActionDeps = {
  core: ActionCore;
  env: Record<string, string | undefined>;
  signals: SignalSource;
  fetch?: typeof fetch;
  githubReporter?: (settings: GithubDeploymentSettings, warn: (message: string) => void) => Pick<GithubDeploymentReporter, 'start' | 'status'>;
};

/** How long the interrupt request after a cancel may take: the runner kills the process ~10 s after SIGINT. */
const INTERRUPT_BUDGET_MS = 4000;
const FORCED_EXIT_MS = 7000;

function defaultDeps(): ActionDeps {
  return { core: actionsCore as unknown as ActionCore, env: process.env, signals: process };
}

/**
 * The Action: reads the inputs, creates or PATCHes the deployment, waits on the revision it created
 * and reports outputs, a job summary, log groups and annotations. Never throws; failure is
 * `core.setFailed`.
 */
export async function run(deps: ActionDeps = defaultDeps()): Promise<void> {
  try {
    await runAction(deps);
  } catch (error) {
    // A bug, not a deploy outcome: still fail the step with something readable.
    deps.core.setFailed(`The action failed unexpectedly: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  }
}

async function runAction(deps: ActionDeps): Promise<void> {
  const { core, env } = deps;
  // Mask the key before anything can print it, even if the inputs turn out to be wrong.
  const rawKey = core.getInput('api-key').trim();
  if (rawKey) core.setSecret(rawKey);

  let inputs: ActionInputs;
  try {
    inputs = readInputs((name) => core.getInput(name), env);
  } catch (error) {
    core.setFailed(error instanceof InputError ? error.message : `Could not read the inputs: ${String(error)}`);
    return;
  }
  for (const secret of inputs.deploy.secrets ?? []) {
    if (secret.value.trim() !== '') core.setSecret(secret.value);
  }

  if (inputs.githubOidc) {
    const minted = await keyFromGithubOidc(core, inputs, deps.fetch);
    if (!minted) return;
    inputs = { ...inputs, deploy: { ...inputs.deploy, apiKey: minted } };
  }

  const controller = new AbortController();
  let cancelledBy: string | null = null;
  const onSignal = (signal: string) => () => {
    if (cancelledBy) return;
    cancelledBy = signal;
    core.info(`Received ${signal}: stopping the wait${inputs.cancelOnAbort ? ' and interrupting the revision' : ''}.`);
    controller.abort(new Error(`cancelled by ${signal}`));
    // A safety net: the runner sends SIGKILL about 10 s after its SIGINT; leave before that even if a request hangs.
    setTimeout(() => process.exit(1), FORCED_EXIT_MS).unref();
  };
  deps.signals.once('SIGINT', onSignal('SIGINT'));
  deps.signals.once('SIGTERM', onSignal('SIGTERM'));

  const client = new ApiClient({
    baseUrl: inputs.deploy.apiUrl,
    apiKey: inputs.deploy.apiKey,
    workspaceId: inputs.deploy.workspaceId,
    fetch: deps.fetch,
    userAgent: 'agent-deploy-action',
    onRetry: (event) => core.info(`${event.what}: ${event.reason}; retry ${event.attempt} in ${formatDuration(event.delayMs)}.`),
    // A field the server ignored (or any other Warning it sends) shows as a workflow warning.
    onWarning: (event) => core.warning(`${event.what}: ${event.text}`),
  });

  const label = inputs.deploy.target.kind === 'name' ? inputs.deploy.target.name : inputs.deploy.target.deploymentId;
  const reporter = inputs.githubDeployment
    ? (deps.githubReporter ?? ((s, warn) => new GithubDeploymentReporter(s, warn)))(inputs.githubDeployment, (m) => core.warning(m))
    : null;
  await reporter?.start(`Deploying ${label}`);

  const result = await deployAndWait(
    client,
    inputs.deploy,
    {
      onDeployment: (deployment, action) => {
        core.setOutput('deployment-id', deployment.id);
        core.info(`Deployment ${deployment.name} (${deployment.id}) ${action}.`);
      },
      onRevision: (revisionId) => {
        core.setOutput('revision-id', revisionId);
        core.info(
          `Revision ${revisionId}: ${inputs.deploy.wait ? `waiting up to ${formatDuration(inputs.deploy.waitTimeoutMs)} for DEPLOYED` : 'not waiting (wait: false)'}.`,
        );
      },
      onStatus: (transition) => {
        core.setOutput('status', transition.status);
        core.info(`${transition.at}  ${transition.status}${transition.message ? `: ${transition.message}` : ''}`);
      },
      onInfo: (message) => core.info(message),
    },
    controller.signal,
  );

  if (result.outcome === 'cancelled' && inputs.cancelOnAbort) await interrupt(client, result, core);

  writeOutputs(core, result);
  reportFailure(core, result);
  await writeSummary(core, result, label);
  await reporter?.status(...githubState(result));

  switch (result.outcome) {
    case 'deployed':
      core.info(`Revision ${result.revisionId} is DEPLOYED${result.url ? ` at ${result.url}` : ''}.`);
      break;
    case 'unchanged':
    case 'not-waited':
      break;
    default:
      core.setFailed(result.reason ?? `The deploy ended with ${result.outcome}.`);
  }
}

/**
 * Keyless CI: the runner's ID token (audience `oidc-audience`, default `api-url`) exchanged for a
 * workspace key of at most an hour, masked before anything can print it. Null (and the step
 * failed) when either step is refused.
 */
async function keyFromGithubOidc(core: ActionCore, inputs: ActionInputs, fetchImpl: typeof fetch | undefined): Promise<string | null> {
  const { audience } = inputs.githubOidc!;
  let idToken: string;
  try {
    idToken = await core.getIDToken(audience);
  } catch (error) {
    core.setFailed(
      `No api-key was given, and the runner refused a GitHub OIDC token (does the job have permissions: id-token: write?): ${error instanceof Error ? error.message : String(error)}`,
    );
    return null;
  }
  core.setSecret(idToken);
  try {
    const exchanger = new ApiClient({ baseUrl: inputs.deploy.apiUrl, apiKey: '', fetch: fetchImpl, userAgent: 'agent-deploy-action' });
    const minted = await exchanger.exchangeGithubToken(idToken, inputs.deploy.workspaceId);
    core.setSecret(minted.api_key);
    core.info(
      `Exchanged the workflow's GitHub OIDC token (audience ${audience}) for key ${minted.key_id} of workspace ${minted.workspace_id}, valid until ${minted.expires_at}.`,
    );
    return minted.api_key;
  } catch (error) {
    core.setFailed(`The control plane refused the workflow's GitHub OIDC token: ${error instanceof Error ? error.message : String(error)}`);
    return null;
  }
}

/** After a cancel: interrupt the revision if it has not ended, within the time the runner leaves. */
async function interrupt(client: ApiClient, result: DeployResult, core: ActionCore): Promise<void> {
  const deploymentId = result.deployment?.id;
  if (!deploymentId || !result.revisionId || (result.status && isTerminal(result.status))) return;
  try {
    const revision = await client.interruptRevision(deploymentId, result.revisionId, AbortSignal.timeout(INTERRUPT_BUDGET_MS));
    result.status = revision.status;
    result.reason = `The run was cancelled; revision ${revision.id} was interrupted (${revision.status}).`;
  } catch (error) {
    core.warning(`Could not interrupt revision ${result.revisionId}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Outputs are written on every outcome, so later steps (and `if: failure()` ones) can use them. */
function writeOutputs(core: ActionCore, result: DeployResult): void {
  if (result.deployment) core.setOutput('deployment-id', result.deployment.id);
  core.setOutput('revision-id', result.revisionId ?? '');
  core.setOutput('status', result.status ?? (result.outcome === 'unchanged' ? 'UNCHANGED' : ''));
  core.setOutput('url', result.url ?? '');
}

/** The revision's last log lines in log groups; the reason becomes the error annotation through `setFailed`. */
function reportFailure(core: ActionCore, result: DeployResult): void {
  if (!['failed', 'timeout', 'error', 'cancelled'].includes(result.outcome) || !result.reason) return;
  for (const type of ['build', 'deploy'] as const) {
    const lines = result.logs[type];
    if (!lines.length) continue;
    core.startGroup(`Last ${lines.length} ${type} log lines of revision ${result.revisionId}`);
    for (const line of lines) core.info(`${line.timestamp} ${line.level.toUpperCase().padEnd(5)} ${line.message}`);
    core.endGroup();
  }
}

async function writeSummary(core: ActionCore, result: DeployResult, label: string): Promise<void> {
  try {
    renderSummary(core.summary, result, label);
    await core.summary.write();
  } catch (error) {
    // Outside a runner there is no GITHUB_STEP_SUMMARY: the log already has everything.
    core.summary.emptyBuffer();
    core.info(`No job summary written: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function githubState(result: DeployResult): [state: 'success' | 'failure' | 'in_progress' | 'error', description: string, url?: string | null] {
  switch (result.outcome) {
    case 'deployed':
      return ['success', `Revision ${result.revisionId} deployed`, result.url];
    case 'unchanged':
      return ['success', 'No new revision', result.url];
    case 'not-waited':
      return ['in_progress', `Revision ${result.revisionId} requested; not waited for`, result.url];
    case 'error':
      return ['error', result.reason ?? 'error'];
    default:
      return ['failure', result.reason ?? result.outcome];
  }
}
