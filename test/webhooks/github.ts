import { randomBytes } from 'node:crypto';
import { Webhooks } from '@octokit/webhooks';
import type { Api } from '../helpers/api.ts';
import { eventually } from '../helpers/api.ts';

/** A fake 40-hex commit id. */
export function sha(): string {
  return randomBytes(20).toString('hex');
}

export type PushOptions = {
  repo: string;
  ref?: string;
  after?: string;
  installationId?: number | null;
  message?: string;
  deleted?: boolean;
  htmlUrl?: string;
};

/** A push payload in GitHub's shape (the fields a receiver reads, and the usual others). */
export function pushPayload(options: PushOptions) {
  const after = options.after ?? sha();
  const htmlUrl = options.htmlUrl ?? `https://github.com/${options.repo}`;
  const commit = {
    id: after,
    tree_id: sha(),
    distinct: true,
    message: options.message ?? 'Change the agent',
    timestamp: '2026-11-22T10:00:00Z',
    url: `${htmlUrl}/commit/${after}`,
    author: { name: 'Ada', email: 'ada@example.com', username: 'ada' },
    committer: { name: 'Ada', email: 'ada@example.com', username: 'ada' },
    added: [],
    removed: [],
    modified: ['agent.py'],
  };
  return {
    ref: options.ref ?? 'refs/heads/main',
    before: sha(),
    after: options.deleted ? '0000000000000000000000000000000000000000' : after,
    created: false,
    deleted: options.deleted ?? false,
    forced: false,
    base_ref: null,
    compare: `${htmlUrl}/compare/a...b`,
    commits: options.deleted ? [] : [commit],
    head_commit: options.deleted ? null : commit,
    repository: {
      id: 1,
      name: options.repo.split('/')[1],
      full_name: options.repo,
      private: false,
      html_url: htmlUrl,
      clone_url: `${htmlUrl}.git`,
      ssh_url: `git@github.com:${options.repo}.git`,
      git_url: `git://github.com/${options.repo}.git`,
      default_branch: 'main',
    },
    pusher: { name: 'ada', email: 'ada@example.com' },
    sender: { login: 'ada', id: 1, type: 'User' },
    ...(options.installationId === null || options.installationId === undefined ? {} : { installation: { id: options.installationId, node_id: 'x' } }),
  };
}

/** Signs with the library's own `sign()` (the same HMAC GitHub computes). */
export async function signature(secret: string, body: string): Promise<string> {
  return new Webhooks({ secret }).sign(body);
}

export type Delivery = { status: number; body: any; id: string };

/** POSTs a delivery as GitHub does; `headers` overrides (a null value removes the header). */
export async function deliver(
  baseUrl: string,
  event: string,
  payload: unknown,
  options: { secret?: string; id?: string; body?: string; headers?: Record<string, string | null>; path?: string } = {},
): Promise<Delivery> {
  const body = options.body ?? JSON.stringify(payload);
  const id = options.id ?? crypto.randomUUID();
  const headers: Record<string, string | null> = {
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/test',
    'x-github-event': event,
    'x-github-delivery': id,
    'x-hub-signature-256': options.secret ? await signature(options.secret, body) : null,
    ...options.headers,
  };
  const response = await fetch(`${baseUrl}${options.path ?? '/v1/webhooks/github'}`, {
    method: 'POST',
    headers: Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== null)),
    body,
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // leave as text
  }
  return { status: response.status, body: parsed, id };
}

/**
 * Creates (or rotates) the workspace's repository-webhook secret; answers the secret and the path
 * its repository webhooks deliver to (the `path` option of `deliver`).
 */
export async function workspaceHook(api: Api): Promise<{ secret: string; path: string; payloadUrl: string }> {
  const created = await api.post('/v1/webhooks/github/secret', {});
  if (created.status !== 201) throw new Error(`webhook secret: ${created.status} ${JSON.stringify(created.body)}`);
  return { secret: created.body.secret, path: new URL(created.body.payload_url).pathname, payloadUrl: created.body.payload_url };
}

/** Waits until the workspace's delivery log shows the delivery processed, and answers its entry. */
export function processedDelivery(api: Api, deliveryId: string, timeoutMs = 15_000) {
  return eventually(async () => {
    const log = await api.get(`/v1/webhooks/github/deliveries?delivery_id=${encodeURIComponent(deliveryId)}`);
    const entry = log.body?.resources?.[0];
    return entry && entry.outcome !== 'pending' ? entry : undefined;
  }, timeoutMs);
}

/** Every revision of a deployment, oldest first. */
export async function revisionsOf(api: Api, deploymentId: string): Promise<any[]> {
  const response = await api.get(`/v2/deployments/${deploymentId}/revisions?limit=100`);
  return [...response.body.resources].reverse();
}
