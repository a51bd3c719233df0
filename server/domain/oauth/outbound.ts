import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { type AllowedHost, parseAllowedHosts } from '../../lib/allowed-hosts.ts';

/** One answer of a name look-up, as `dns.lookup(…, {all: true})` gives it. */
export type ResolvedAddress = { address: string; family: number };
/** Resolves a host name to its addresses; injected in tests to play a hostile resolver. */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolve: Resolve = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * Addresses a tenant's provider URL may not reach: the server's own machine, its networks, and
 * cloud metadata services. A tenant names `token_url` / `auth_url`, and the server POSTs its
 * client secret and codes there, so without this a tenant could make the server talk to anything
 * behind the firewall (SSRF) and read the answers through the flow's error.
 */
const FORBIDDEN = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT (also Alibaba's metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (AWS/GCP/Azure metadata 169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments (Oracle metadata 192.0.0.192)
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  FORBIDDEN.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique-local (AWS metadata fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated, still routed by some)
  ['ff00::', 8], // multicast
] as const) {
  FORBIDDEN.addSubnet(net, prefix, 'ipv6');
}

/**
 * The IPv4 address inside an IPv6 one that carries it (IPv4-mapped `::ffff:a.b.c.d`, the old
 * IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002:AABB:CCDD::/48`), else null: each
 * reaches the IPv4 host, so it is judged as that host.
 */
export function embeddedIpv4(ipv6: string): string | null {
  const groups = expandIpv6(ipv6);
  if (groups === null) return null;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zeros = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  if (zeros(0, 5) && groups[5] === 0xffff) return v4(groups[6]!, groups[7]!);
  if (zeros(0, 6) && (groups[6] !== 0 || groups[7]! > 1)) return v4(groups[6]!, groups[7]!);
  if (groups[0] === 0x64 && groups[1] === 0xff9b && zeros(2, 6)) return v4(groups[6]!, groups[7]!);
  if (groups[0] === 0x2002) return v4(groups[1]!, groups[2]!);
  return null;
}

/** The eight 16-bit groups of an IPv6 address (dotted IPv4 tail allowed), or null. */
function expandIpv6(text: string): number[] | null {
  let address = text.toLowerCase().replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) {
    const parts = dotted[1]!.split('.').map(Number);
    address = `${address.slice(0, dotted.index)}${((parts[0]! << 8) | parts[1]!).toString(16)}:${((parts[2]! << 8) | parts[3]!).toString(16)}`;
  }
  const [head, tail] = address.split('::') as [string, string | undefined];
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const missing = 8 - headGroups.length - tailGroups.length;
  if (missing < 0 || (tail === undefined && missing !== 0)) return null;
  const groups = [...headGroups, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...tailGroups].map((g) => Number.parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/** Whether `address` (an IP literal, IPv6 without brackets) is one a provider URL may not reach. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return FORBIDDEN.check(address, 'ipv4');
  if (family === 6) {
    const inner = embeddedIpv4(address);
    if (inner !== null && FORBIDDEN.check(inner, 'ipv4')) return true;
    return FORBIDDEN.check(address.replace(/%.*$/, ''), 'ipv6');
  }
  // Not an address at all: refuse rather than guess.
  return true;
}

/** Why an outbound request was not made. */
export class OutboundRefused extends Error {
  override readonly name = 'OutboundRefused';
  readonly code = 'EOAUTHFORBIDDEN';
}

const CHECK_RESOLVE_TIMEOUT_MS = 5_000;

/**
 * Decides which provider hosts the server may contact: anything that resolves only to public
 * addresses, plus the hosts the operator lists in `OAUTH_ALLOWED_HOSTS` (an identity provider on
 * the internal network, the tests' loopback provider).
 */
export class OutboundPolicy {
  readonly #allowed: AllowedHost[];
  readonly #resolve: Resolve;
  readonly #refusal: string;

  /** `setting`: the setting that lists the allowed hosts, named in the refusal (`OAUTH_ALLOWED_HOSTS` by default). */
  constructor(options: { allowedHosts: string; resolve?: Resolve; setting?: string }) {
    this.#allowed = parseAllowedHosts(options.allowedHosts);
    this.#resolve = options.resolve ?? systemResolve;
    this.#refusal = refusalNaming(options.setting ?? 'OAUTH_ALLOWED_HOSTS');
  }

  /** Whether the operator allowed this URL's host (and port) outright. */
  isAllowedHost(url: URL): boolean {
    const port = url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80';
    return this.#allowed.some((entry) => entry.hostname === url.hostname && (entry.port === null || entry.port === port));
  }

  /**
   * The check at create / PATCH time, so the operator of a provider hears at once: null when
   * acceptable, else why not. A host that does not resolve now is accepted (DNS may be down for a
   * moment); every request checks again on the address it connects to.
   */
  async refusal(urlText: string): Promise<string | null> {
    const url = new URL(urlText);
    if (this.isAllowedHost(url)) return null;
    const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(literal) !== 0) return isForbiddenAddress(literal) ? this.#refusal : null;
    let addresses: ResolvedAddress[];
    try {
      addresses = await withTimeout(this.#resolve(url.hostname), CHECK_RESOLVE_TIMEOUT_MS);
    } catch {
      return null;
    }
    return addresses.some((a) => isForbiddenAddress(a.address)) ? this.#refusal : null;
  }

  /**
   * The address to connect to for `url`: resolved once, checked, and then used for the connection
   * itself (the request's `lookup`), so a name that resolves to a public address for the check and
   * to an internal one a moment later (DNS rebinding) never gets the second answer used.
   * Throws `OutboundRefused` for a forbidden address.
   */
  async pinnedAddress(url: URL): Promise<ResolvedAddress> {
    const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const allowed = this.isAllowedHost(url);
    if (isIP(literal) !== 0) {
      if (!allowed && isForbiddenAddress(literal)) throw new OutboundRefused(this.#refusal);
      return { address: literal, family: isIP(literal) };
    }
    const addresses = await this.#resolve(url.hostname);
    if (addresses.length === 0) throw new Error('The name did not resolve');
    // Any forbidden answer refuses the host: a resolver that mixes answers is not to be trusted.
    if (!allowed && addresses.some((a) => isForbiddenAddress(a.address))) throw new OutboundRefused(this.#refusal);
    return addresses[0]!;
  }
}

const refusalNaming = (setting: string) =>
  `The host resolves to an address this server may not contact (loopback, private, link-local, unique-local, carrier-grade NAT or cloud metadata); an operator can allow it with ${setting}`;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout')), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
