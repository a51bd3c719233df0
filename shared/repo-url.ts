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
