import { getOctokit } from '@actions/github';
import type { GithubDeploymentSettings } from './inputs.ts';

export type GithubDeploymentState = 'in_progress' | 'success' | 'failure' | 'error';

/**
 * Reports the run to GitHub's Deployments API: one deployment for the commit and environment,
 * `in_progress` at the start, then `success` with the URL or `failure`. GitHub refusing (no
 * `deployments: write` permission, an unreachable API) is a warning: the deploy itself is what
 * the step is for.
 */
export class GithubDeploymentReporter {
  readonly #settings: GithubDeploymentSettings;
  readonly #warn: (message: string) => void;
  readonly #octokit: ReturnType<typeof getOctokit>;
  #id: number | null = null;
  #disabled = false;

  constructor(settings: GithubDeploymentSettings, warn: (message: string) => void) {
    this.#settings = settings;
    this.#warn = warn;
    this.#octokit = getOctokit(settings.token, { baseUrl: settings.apiUrl });
  }

  /** Creates the GitHub deployment and marks it in progress. */
  async start(description: string): Promise<void> {
    const { owner, repo, ref, environment } = this.#settings;
    try {
      const created = await this.#octokit.rest.repos.createDeployment({
        owner,
        repo,
        ref,
        environment,
        description,
        auto_merge: false,
        required_contexts: [],
        transient_environment: false,
      });
      if (!('id' in created.data)) throw new Error(`GitHub did not create a deployment: ${created.data.message ?? created.status}`);
      this.#id = created.data.id;
    } catch (error) {
      this.#refused('create a GitHub deployment', error);
      return;
    }
    await this.status('in_progress', description);
  }

  /** Adds a status to the GitHub deployment (no-op when it could not be created). */
  async status(state: GithubDeploymentState, description: string, environmentUrl?: string | null): Promise<void> {
    if (this.#id === null || this.#disabled) return;
    const { owner, repo, environment, runUrl } = this.#settings;
    try {
      await this.#octokit.rest.repos.createDeploymentStatus({
        owner,
        repo,
        deployment_id: this.#id,
        state,
        environment,
        // GitHub caps descriptions at 140 characters.
        description: description.slice(0, 140),
        ...(runUrl ? { log_url: runUrl } : {}),
        ...(environmentUrl ? { environment_url: environmentUrl } : {}),
        auto_inactive: state === 'success',
      });
    } catch (error) {
      this.#refused(`set the GitHub deployment status to ${state}`, error);
    }
  }

  #refused(what: string, error: unknown): void {
    this.#disabled = true;
    const status = (error as { status?: number }).status;
    this.#warn(
      `Could not ${what}${status ? ` (GitHub answered ${status})` : ''}: ${error instanceof Error ? error.message : String(error)}. ` +
        'The deploy goes on; give the workflow `permissions: deployments: write` to report to GitHub Deployments.',
    );
  }
}
