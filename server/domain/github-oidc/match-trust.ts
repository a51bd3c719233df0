import type { GithubTrust } from '../../../shared/schemas/github-trust.ts';
import type { GithubClaims } from './verify-token.ts';

/**
 * Events whose workflows run code from elsewhere (a fork's pull request, another workflow's
 * artifacts) under the base repository's identity: their tokens are refused whatever trusts them.
 */
export const REFUSED_EVENTS: ReadonlySet<string> = new Set(['pull_request_target', 'workflow_run']);

/**
 * The first claim of `claims` that entry `entry` does not allow, or null when it allows them all.
 * Ids are compared as decimal strings, exactly; each field an entry sets must equal the claim
 * exactly (case included), and a claim the token lacks matches no set field. Fields the entry
 * leaves unset allow any value.
 */
export function mismatchedClaim(entry: GithubTrust, claims: GithubClaims): keyof GithubClaims | null {
  if (String(entry.repository_id) !== claims.repository_id) return 'repository_id';
  if (String(entry.repository_owner_id) !== claims.repository_owner_id) return 'repository_owner_id';
  if (entry.ref !== null && entry.ref !== claims.ref) return 'ref';
  if (entry.environment !== null && entry.environment !== claims.environment) return 'environment';
  if (entry.job_workflow_ref !== null && entry.job_workflow_ref !== claims.job_workflow_ref) return 'job_workflow_ref';
  return null;
}

/** The entries that allow `claims`, and, when none does, the claim that kept the most specific one out. */
export function matchTrust(entries: readonly GithubTrust[], claims: GithubClaims): { matched: GithubTrust[]; mismatch: keyof GithubClaims | null } {
  const matched: GithubTrust[] = [];
  let mismatch: keyof GithubClaims | null = null;
  // The order of the checks above: a later claim means the entry matched more before failing.
  const order: Array<keyof GithubClaims> = ['repository_id', 'repository_owner_id', 'ref', 'environment', 'job_workflow_ref'];
  for (const entry of entries) {
    const claim = mismatchedClaim(entry, claims);
    if (claim === null) matched.push(entry);
    else if (mismatch === null || order.indexOf(claim) > order.indexOf(mismatch)) mismatch = claim;
  }
  return { matched, mismatch: matched.length > 0 ? null : mismatch };
}
