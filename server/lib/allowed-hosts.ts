export type AllowedHost = { hostname: string; port: string | null };

/** `OAUTH_ALLOWED_HOSTS` entries: `host` (any port) or `host:port`, IPv6 in brackets. */
export function parseAllowedHosts(list: string): AllowedHost[] {
  const hosts: AllowedHost[] = [];
  for (const raw of list.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]/\s]+)(?::(\d{1,5}))?$/.exec(entry);
    if (!match || (match[2] !== undefined && Number(match[2]) > 65535)) throw new Error(`'${entry}' is not a host or host:port`);
    // Let the URL parser normalise the name as it will normalise the provider's URLs.
    let hostname: string;
    try {
      hostname = new URL(`http://${match[1]}`).hostname;
    } catch {
      throw new Error(`'${entry}' is not a host or host:port`);
    }
    // A port as the URL parser writes it ("0443" is 443).
    hosts.push({ hostname, port: match[2] === undefined ? null : String(Number(match[2])) });
  }
  return hosts;
}
