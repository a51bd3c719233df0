import { createHash } from 'node:crypto';

const DNS_LABEL_MAX = 63;

/**
 * The DNS-safe form of a deployment name, for URLs and Kubernetes objects: lower case, `_` → `-`.
 * A name that changes on the way (`My_Agent`) gets a short hash of the original appended, so two
 * names that fold to the same form (`my_agent`, `my-agent`) never share one; a name that is
 * already DNS-safe stays as it is.
 */
export function dnsSafeName(name: string): string {
  const folded = name.toLowerCase().replaceAll('_', '-');
  if (folded === name && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 6);
  const base = folded.slice(0, DNS_LABEL_MAX - hash.length - 1).replace(/-+$/, '');
  return base ? `${base}-${hash}` : hash;
}

/** A deployment's URL from an agent's `--public-url` template: `{name}` is the name's DNS-safe form. */
export function deploymentUrl(template: string, name: string): string {
  return template.replaceAll('{name}', dnsSafeName(name)).replace(/\/+$/, '');
}
