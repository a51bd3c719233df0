import { cloneUrlOf, repositoryOnHost } from '../../shared/repo-url.ts';

/** What the reconciler may contact: settings `RECONCILE_ALLOWED_HOSTS` and `ALLOW_FILE_REPO_URLS`. */
export type RemotePolicy = {
  /** `host` (its https port, 443) or `host:port`, lower case. */
  allowedHosts: string[];
  allowFileUrls: boolean;
  /** The GitHub App's host (`GITHUB_URL`) when App settings are set: always contacted, with its own scheme. */
  githubUrl?: string;
};

/** The URL git is given for a `repo_url`, or why it is not contacted at all. */
export type RemoteTarget = { ok: true; url: string; file: boolean } | { ok: false; reason: string };

const SCP_FORM = /^[^@\s/]+@([^:\s/]+):(.+)$/;

/**
 * Decides whether, and how, the reconciler reads a tenant's `repo_url`. Only https and (when the
 * server allows them) file URLs are read. An ssh URL is read over https from the same host: the
 * reconciler holds no SSH identity, and a public repository's heads are readable over https. The
 * host (and port) must be in the allowed list, so a tenant cannot make the server contact an
 * internal address or scan ports.
 */
export function reconcileTarget(repoUrl: string, policy: RemotePolicy): RemoteTarget {
  const trimmed = repoUrl.trim();
  // The App's own GitHub (an Enterprise Server over http included) is the operator's choice, not a tenant's.
  const onGithub = policy.githubUrl ? repositoryOnHost(trimmed, policy.githubUrl) : null;
  if (onGithub) return { ok: true, url: cloneUrlOf(onGithub, policy.githubUrl!, trimmed), file: false };
  if (trimmed.startsWith('file://')) {
    return policy.allowFileUrls
      ? { ok: true, url: trimmed, file: true }
      : { ok: false, reason: 'file:// repository URLs are not allowed on this server (ALLOW_FILE_REPO_URLS)' };
  }
  let https: URL;
  try {
    const scp = SCP_FORM.exec(trimmed);
    if (scp && !trimmed.includes('://')) {
      https = new URL(`https://${scp[1]}/${scp[2]!.replace(/^\/+/, '')}`);
    } else {
      const parsed = new URL(trimmed);
      if (parsed.protocol === 'ssh:') {
        // The ssh port means nothing over https: the host's https port is used.
        https = new URL(`https://${parsed.hostname}${parsed.pathname}`);
      } else if (parsed.protocol === 'https:') {
        if (parsed.username || parsed.password) return { ok: false, reason: 'the URL carries credentials' };
        https = parsed;
      } else {
        return { ok: false, reason: `${parsed.protocol} URLs are not read by the reconciler (https only)` };
      }
    }
  } catch {
    return { ok: false, reason: 'the URL cannot be parsed' };
  }
  const host = https.hostname.toLowerCase();
  const entry = https.port ? `${host}:${https.port}` : host;
  const allowed = policy.allowedHosts.some((h) => h === entry || (!https.port && h === `${host}:443`));
  if (!allowed) return { ok: false, reason: `the host ${entry} is not in RECONCILE_ALLOWED_HOSTS` };
  https.search = '';
  https.hash = '';
  return { ok: true, url: https.toString(), file: false };
}
