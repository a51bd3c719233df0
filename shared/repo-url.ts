/**
 * The form two repository URLs are compared in: `host/owner/repo`, lower case, without scheme,
 * user, `.git` suffix or trailing slash. `https://github.com/Acme/App.git`,
 * `git@github.com:acme/app` and `ssh://git@github.com/acme/app/` all become `github.com/acme/app`.
 * Local `file://` URLs keep their path (case included: file systems are case-sensitive).
 */
export function normalizeRepoUrl(url: string): string {
  const trimmed = url.trim();
  if (trimmed.startsWith('file://')) return trimmed.replace(/\/+$/, '').replace(/\.git$/, '');
  let rest = trimmed;
  const scp = /^[^@\s/]+@([^:\s/]+):(.*)$/.exec(rest);
  if (scp) {
    rest = `${scp[1]}/${scp[2]}`;
  } else {
    rest = rest.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/^[^@/]+@/, '');
  }
  // A port (ssh://git@github.com:22/o/r) is not part of the repository's identity.
  rest = rest.replace(/^([^/:]+):\d+\//, '$1/');
  rest = rest
    .replace(/\/+$/, '')
    .replace(/\.git$/i, '')
    .replace(/\/+$/, '');
  return rest.toLowerCase();
}

/** A repository on the App's GitHub host: its owner and name, or null for a URL elsewhere. */
export type GithubRepository = { owner: string; name: string };

/**
 * The owner and name of `repoUrl` when it is on `webUrl`'s host (https, ssh or scp forms; http
 * only when GitHub itself is reached over http): the repositories an installation token can open.
 */
export function repositoryOnHost(repoUrl: string, webUrl: string): GithubRepository | null {
  const host = new URL(webUrl);
  const trimmed = repoUrl.trim();
  let hostname: string;
  let port = '';
  let path: string;
  const scp = /^[^@\s/]+@([^:\s/]+):(.+)$/.exec(trimmed);
  if (scp && !trimmed.includes('://')) {
    hostname = scp[1]!;
    path = scp[2]!;
  } else {
    let parsed: URL;
    try {
      parsed = new URL(trimmed);
    } catch {
      return null;
    }
    if (parsed.protocol === 'ssh:') {
      hostname = parsed.hostname;
    } else if (parsed.protocol === 'https:' || (parsed.protocol === 'http:' && host.protocol === 'http:')) {
      if (parsed.protocol !== host.protocol) return null;
      hostname = parsed.hostname;
      port = parsed.port;
    } else {
      return null;
    }
    path = parsed.pathname;
  }
  if (hostname.toLowerCase() !== host.hostname.toLowerCase() || (port !== '' && port !== host.port)) return null;
  const parts = path
    .replace(/^\/+/, '')
    .replace(/\/+$/, '')
    .replace(/\.git$/i, '')
    .split('/');
  // GitHub Enterprise Server may live under a path prefix: the repository is the last two segments.
  const prefix = host.pathname.replace(/^\/+|\/+$/g, '');
  const rest = prefix && parts.slice(0, prefix.split('/').length).join('/') === prefix ? parts.slice(prefix.split('/').length) : parts;
  if (rest.length !== 2 || !rest.every((p) => /^[A-Za-z0-9_.-]+$/.test(p))) return null;
  return { owner: rest[0]!, name: rest[1]! };
}

/**
 * The https (or http) URL git fetches a repository on the App's host from: the one a token opens.
 * A `repo_url` already in that form is kept as given (the server answers it as the user named
 * it); an ssh or scp form becomes `GITHUB_URL/<owner>/<name>.git`.
 */
export function cloneUrlOf(repository: GithubRepository, webUrl: string, repoUrl?: string): string {
  const given = repoUrl?.trim().replace(/\/+$/, '');
  if (given?.startsWith(`${new URL(webUrl).protocol}//`)) return given;
  return `${webUrl}/${repository.owner}/${repository.name}.git`;
}
