import type { WebhookDelivery, WebhookDeliveryListQuery, WebhookDeliveryOutcome } from '../../../shared/schemas/webhook-delivery.ts';
import type { StoredDelivery, WebhookStore } from '../../store/webhooks.ts';
import { deliveryKey, githubDeliveryId } from './delivery-key.ts';

/**
 * The delivery log as one workspace sees it: deliveries from installations linked to it, or that
 * touched its deployments, with only its own result lines (never another workspace's).
 */
export class DeliveryLog {
  readonly #store: WebhookStore;

  constructor(store: WebhookStore) {
    this.#store = store;
  }

  async list(tenantId: string, query: WebhookDeliveryListQuery): Promise<{ resources: WebhookDelivery[]; offset: number }> {
    const { delivery_id: githubId, ...rest } = query;
    const page = await this.#store.listForTenant(tenantId, {
      ...rest,
      deliveryKeys: githubId === undefined ? undefined : [githubId, deliveryKey({ kind: 'workspace', workspaceId: tenantId }, githubId)],
    });
    return { resources: page.resources.map(toPublic), offset: page.offset };
  }
}

function toPublic(d: StoredDelivery): WebhookDelivery {
  const results = d.results.map(({ tenant_id: _tenant, ...line }) => line);
  let outcome: WebhookDeliveryOutcome;
  let reason = d.reason;
  if (d.outcome === 'push') {
    outcome = results.some((r) => r.result === 'revision_created') ? 'revisions_created' : 'no_revision';
    if (!reason && results.length === 0) reason = `No github deployment of this workspace tracks the repository ${d.repository ?? '(unnamed)'}.`;
  } else {
    outcome = d.outcome;
  }
  return {
    delivery_id: githubDeliveryId(d.delivery_id),
    event: d.event,
    action: d.action,
    installation_id: d.installation_id,
    repository: d.repository,
    ref: d.ref,
    after: d.after_sha,
    received_at: d.received_at,
    processed_at: d.processed_at,
    outcome,
    reason,
    results,
  };
}
