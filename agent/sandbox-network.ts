import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';

/**
 * The network a sandboxed command gets (docs/decisions/local-agent-network.md): `public`, a network
 * namespace of its own connected by pasta (user-mode networking, no privileges needed) with the
 * private, shared, link-local and loopback ranges unreachable except those allowed; `none`, a
 * namespace with nothing but its own loopback.
 */
export type EgressPolicy = { mode: 'public' | 'none'; allow: string[] };

/**
 * The IPv4 ranges a sandbox may not reach (contract §15). IPv6 is not offered at all (pasta runs
 * with `--ipv4-only`), so fc00::/7 and fe80::/10 cannot be reached either.
 */
export const REFUSED_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16', '127.0.0.0/8', '0.0.0.0/8'];

/**
 * The address inside the sandbox that answers DNS: pasta forwards what is sent to it to the
 * machine's own resolver, whatever range that is in (often loopback or a private address, which
 * the sandbox may not reach itself). From TEST-NET-3: never a real host.
 */
export const SANDBOX_DNS = '203.0.113.53';

/** `--allow-egress` values: IPv4 CIDRs. Answers the sentence to print for a bad one, or null. */
export function badCidr(cidr: string): string | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  if (!match || match.slice(1, 5).some((octet) => Number(octet) > 255) || Number(match[5]) > 32)
    return `--allow-egress ${cidr}: not an IPv4 CIDR such as 10.1.2.0/24`;
  return null;
}

/** The pasta binary, or null (the agent then refuses to start with egress, naming the package). */
export function findPasta(path = process.env.PATH ?? ''): string | null {
  for (const dir of path.split(':').filter(Boolean)) if (existsSync(`${dir}/pasta`)) return `${dir}/pasta`;
  return null;
}

/**
 * The machine's own interface addresses other than loopback: a sandbox's connection to one of
 * them would leave through pasta and reach the machine's listeners on it, so each is made
 * unreachable too (as /32), whatever range it is in.
 */
function hostAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((address) => address && address.family === 'IPv4' && !address.internal)
    .map((address) => `${address!.address}/32`);
}

/**
 * The command line that runs `inner` (bwrap and its arguments) in a network namespace of its own.
 * With egress: pasta makes the namespace (and a user namespace whose root is the caller), with no
 * port forwarded either way (`-t none -u none -T none -U none`: nothing of the machine's loopback
 * shows inside, nothing inside is published outside) and without mapping the gateway to the
 * machine's loopback (`--no-map-gw`); then, as that namespace's root and before the sandbox
 * starts, the refused ranges and the machine's addresses become unreachable routes and the
 * allowed ranges routes through the gateway. The sandbox's own user namespace is a child of it
 * with no capabilities, so nothing inside can change the routes. Without egress bwrap's own
 * `--unshare-net` does it all: the caller adds it to `inner`.
 */
export function inNetworkNamespace(inner: string[], policy: EgressPolicy, pasta: string): string[] {
  if (policy.mode === 'none') return inner;
  const refused = [...REFUSED_RANGES, ...hostAddresses()];
  const script = [
    'set -e',
    // One `ip` for all of them (it stops at the first that fails, and fails): one process started
    // instead of one per range, before every sandboxed command (an agent server's start among them).
    `printf '%s\\n' ${refused.map((cidr) => `'route add unreachable ${cidr}'`).join(' ')} | ip -batch -`,
    // The gateway is looked up only for allowed ranges (two more processes otherwise).
    ...(policy.allow.length > 0 ? ['gw=$(ip -4 route show default | sed -n "s/^default via \\([^ ]*\\).*/\\1/p")'] : []),
    ...policy.allow.map((cidr) => `ip route replace ${cidr} via "$gw"`),
    'exec "$@"',
  ].join('\n');
  return [
    pasta,
    '--config-net',
    '--foreground',
    '--quiet',
    '--ipv4-only',
    '--no-map-gw',
    '--tcp-ports',
    'none',
    '--udp-ports',
    'none',
    '--tcp-ns',
    'none',
    '--udp-ns',
    'none',
    '--dns-forward',
    SANDBOX_DNS,
    '--',
    'sh',
    '-c',
    script,
    'sandbox-network',
    ...inner,
  ];
}

/** The resolv.conf every sandbox with egress sees: pasta's forwarder only. */
export function sandboxResolvConf(workDir: string): string {
  const dir = join(workDir, '.sandbox');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'resolv.conf');
  writeFileSync(file, `nameserver ${SANDBOX_DNS}\noptions timeout:2 attempts:2\n`, { mode: 0o644 });
  return file;
}

/** Whether `ip` (iproute2) is on PATH: the routes are set with it. */
export function hasIp(): boolean {
  try {
    execFileSync('ip', ['-V'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
