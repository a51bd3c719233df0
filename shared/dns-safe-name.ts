import { createHash } from 'node:crypto';

const DNS_LABEL_MAX = 63;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/**
 * 64 bits of SHA-256: finding another name with a given name's suffix (to take over its URL) is
 * a second preimage of 2^64 tries, out of reach; a shorter suffix could be searched for in seconds.
 */
const HASH_HEX = 16;
/** A DNS-safe name that ends like a hash suffix is hashed too, so it can never equal another name's hashed form. */
const LOOKS_HASHED = new RegExp(`-[0-9a-f]{${HASH_HEX}}$`);

/**
 * The URL form (DNS-safe form) of a deployment name, for URLs, routes and Kubernetes objects: lower
 * case, `_` → `-`. A name that changes on the way (`My_Agent`, `Victim2`) gets a hash of the
 * original appended, so two names that fold alike (`Victim2`, `victim2`) never share a form; a name
 * that is already DNS-safe stays as it is, unless it ends like a hash suffix. Distinct names
 * therefore have distinct forms: everything that identifies a deployment by name outside the API
 * (a proxy route, a host name, `custom_url`) compares this form, never the name folded on the spot.
 * The control plane and the listener agents share it, so both route by the same form.
 */
export function dnsSafeName(name: string): string {
  const folded = name.toLowerCase().replaceAll('_', '-');
  if (folded === name && DNS_LABEL.test(name) && !LOOKS_HASHED.test(name)) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, HASH_HEX);
  const base = folded.slice(0, DNS_LABEL_MAX - hash.length - 1).replace(/-+$/, '');
  return base ? `${base}-${hash}` : hash;
}

/** The first label of a server-set `custom_url`: the URL form and `suffix`, within one DNS label. */
export function urlLabel(name: string, suffix: string): string {
  const form = dnsSafeName(name)
    .slice(0, DNS_LABEL_MAX - suffix.length - 1)
    .replace(/-+$/, '');
  return `${form}-${suffix}`;
}

/** A deployment's URL from an agent's `--public-url` template: `{name}` is the name's DNS-safe form. */
export function deploymentUrl(template: string, name: string): string {
  return template.replaceAll('{name}', dnsSafeName(name)).replace(/\/+$/, '');
}
