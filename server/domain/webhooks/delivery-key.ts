/**
 * Who a delivery is for, by the endpoint it came to: the GitHub App's (the server's secret; the
 * delivery is addressed by the installation it names), or one workspace's repository webhooks
 * (that workspace's own secret; the delivery reaches that workspace only).
 */
export type DeliveryAddress = { kind: 'app' } | { kind: 'workspace'; workspaceId: string };

const WORKSPACE_PREFIX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\//;

/**
 * The key a delivery is stored and counted once under. A workspace chooses the `X-GitHub-Delivery`
 * of what it signs, so its deliveries are keyed under the workspace: a workspace that sent a
 * delivery id before GitHub does cannot make the App's (or another workspace's) delivery with that
 * id count as a redelivery and be dropped. GitHub's ids never contain `/` (the route refuses them).
 */
export function deliveryKey(address: DeliveryAddress, githubId: string): string {
  return address.kind === 'workspace' ? `${address.workspaceId}/${githubId}` : githubId;
}

/** The `X-GitHub-Delivery` a stored key came from (what GitHub shows under "Recent Deliveries"). */
export function githubDeliveryId(key: string): string {
  return key.replace(WORKSPACE_PREFIX, '');
}
