import { type GithubRepository, repositoryOnHost } from '../../shared/repo-url.ts';
import type { GithubDeploymentRecord, GithubStore } from '../store/github.ts';
import type { DeploymentRecord, Store } from '../store/types.ts';
import type { GithubApp } from './app-settings.ts';
import type { InstallationPermissions } from './installation-permissions.ts';
import { TryLater } from './status-calls.ts';

/** The repository a deployment's statuses go to, and what the sender's token may do there. */
export type Target = {
  repository: GithubRepository;
  installationId: number;
  path: string;
  /** The permissions of the sender's token for this installation. */
  write: Record<string, 'write'>;
  /** Whether check runs replace commit statuses. */
  checks: boolean;
};

/** What the sender's token may do: create deployments and statuses on the one repository (and check runs, where granted). */
const WRITE = { deployments: 'write', statuses: 'write' } as const;
const WRITE_WITH_CHECKS = { checks: 'write', deployments: 'write', statuses: 'write' } as const;

export type TargetDeps = {
  app: GithubApp;
  store: Pick<Store, 'getIntegrationById'>;
  github: GithubStore;
  /** Whether an installation grants `checks: write`: check runs then replace commit statuses. */
  permissions: InstallationPermissions;
};

/** The deployment's repository on the App's GitHub, through a proven, unsuspended installation; null otherwise. */
export async function targetOf(deployment: DeploymentRecord, deps: TargetDeps): Promise<Target | null> {
  const { app, store, github, permissions } = deps;
  const repository = deployment.source_config.repo_url ? repositoryOnHost(deployment.source_config.repo_url, app.webUrl) : null;
  if (!repository || !deployment.source_config.integration_id) return null;
  const integration = await store.getIntegrationById(deployment.source_config.integration_id);
  if (!integration || integration.suspended || !(await github.accountOf(integration.id))) return null;
  let checks: boolean;
  try {
    checks = await permissions.canWrite(integration.installation_id, 'checks');
  } catch (error) {
    throw new TryLater(`the installation's permissions could not be read: ${(error as Error).message}`, null);
  }
  return {
    repository,
    installationId: integration.installation_id,
    path: `${repository.owner}/${repository.name}`,
    write: checks ? WRITE_WITH_CHECKS : WRITE,
    checks,
  };
}

/** Where a recorded GitHub deployment lives (to mark it inactive once its deployment is gone). */
export function targetOfRecord(record: GithubDeploymentRecord): Target {
  return {
    repository: { owner: record.owner, name: record.repo },
    installationId: record.installation_id,
    path: `${record.owner}/${record.repo}`,
    write: WRITE,
    checks: false,
  };
}
