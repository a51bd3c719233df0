/** How git reaches a private repository: the URL the token opens and the token. */
export type RepoCredentials = { url: string; token: string };

/**
 * What the pipeline and the reconciler ask of the GitHub App to read a private repository:
 * credentials for a URL through a deployment's integration, or null when it is read without any.
 * `github/repo-access.ts` implements it; the domain names only this, so it does not import github/.
 */
export type RepositoryAccess = {
  credentials(repoUrl: string | null, integrationId: string | null, context?: Record<string, unknown>): Promise<RepoCredentials | null>;
};

/**
 * GitHub will not mint the token until someone changes something on GitHub: the repository is not
 * among the installation's selected ones, the installation has not accepted the permissions asked,
 * it is gone or suspended, or the App's own credentials are wrong. Retrying changes nothing; the
 * message says what to fix, and where.
 */
export class TokenRefused extends Error {
  override readonly name = 'TokenRefused';
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}
