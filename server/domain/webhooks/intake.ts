import { verifyWithFallback } from '@octokit/webhooks-methods';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import type { NewDelivery, WebhookStore } from '../../store/webhooks.ts';
import { Unauthorized, Unavailable, UnsupportedMediaType } from '../errors.ts';
import type { DeliveryAddress } from './delivery-key.ts';
import { deliveryKey } from './delivery-key.ts';
import type { WorkspaceWebhookSecrets } from './workspace-secrets.ts';

export type IncomingDelivery = {
  /** `X-GitHub-Delivery` */
  id: string;
  /** `X-GitHub-Event` */
  event: string;
  /** `X-Hub-Signature-256` */
  signature: string;
  /** The body exactly as received: the signature is over these bytes. */
  body: string;
};

export type { DeliveryAddress } from './delivery-key.ts';

/** Where GitHub delivers the App's (and the server-wide secret's) webhooks; the App's manifest names it. */
export const WEBHOOK_PATH = '/v1/webhooks/github';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Longest value of a display field (ref, repository, after) kept from a body: GitHub's are far shorter. */
const FIELD_LIMIT = 512;

/**
 * Accepts GitHub deliveries: the signature is checked on the raw text (`@octokit/webhooks-methods`,
 * constant-time, current secret first) with the secrets of the endpoint the delivery came to, and
 * only then is the body parsed and stored as pending. Processing happens later, in the delivery worker.
 */
export class WebhookIntake {
  readonly #appSecrets: string[];
  readonly #deps: { workspaceSecrets: WorkspaceWebhookSecrets; store: WebhookStore; clock: Clock; log: Logger; onStored: () => void };

  constructor(deps: {
    secret: string | undefined;
    previousSecrets: string[];
    workspaceSecrets: WorkspaceWebhookSecrets;
    store: WebhookStore;
    clock: Clock;
    log: Logger;
    onStored: () => void;
  }) {
    this.#deps = deps;
    this.#appSecrets = deps.secret ? [deps.secret, ...deps.previousSecrets] : [];
  }

  /**
   * The secrets a delivery to this endpoint may be signed with, checked before the body is read:
   * `Unavailable` (503) for the App endpoint with no `GITHUB_WEBHOOK_SECRET`; `Unauthorized` (401)
   * for a workspace with no secret, or no such workspace (the two are not told apart).
   */
  async secretsFor(address: DeliveryAddress): Promise<string[]> {
    if (address.kind === 'app') {
      if (this.#appSecrets.length === 0) {
        throw new Unavailable('GitHub webhooks are not configured on this server: set GITHUB_WEBHOOK_SECRET to the secret entered in GitHub.');
      }
      return this.#appSecrets;
    }
    const secrets = UUID.test(address.workspaceId) ? await this.#deps.workspaceSecrets.accepted(address.workspaceId) : [];
    if (secrets.length === 0) {
      throw new Unauthorized(
        "No repository-webhook secret matches: create the workspace's secret with POST /v1/webhooks/github/secret and enter it in GitHub.",
      );
    }
    return secrets;
  }

  /** Verifies and stores one delivery; `ping` is stored as done. Throws a domain error for a refused one. */
  async receive(delivery: IncomingDelivery, address: DeliveryAddress): Promise<'queued' | 'pong'> {
    const [secret, ...others] = await this.secretsFor(address);
    const matches = delivery.body.length > 0 && (await verifyWithFallback(secret!, delivery.body, delivery.signature, others));
    if (!matches) {
      throw new Unauthorized(
        address.kind === 'app'
          ? 'The X-Hub-Signature-256 signature does not match the body for the configured webhook secret.'
          : "The X-Hub-Signature-256 signature does not match the body for this workspace's webhook secret.",
      );
    }
    let payload: unknown;
    try {
      payload = JSON.parse(delivery.body);
    } catch {
      throw new UnsupportedMediaType("The body is not JSON: set the webhook's content type to application/json in GitHub.");
    }
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw new UnsupportedMediaType('The body must be a JSON object.');
    await this.#store(delivery, payload as Record<string, unknown>, address);
    return delivery.event === 'ping' ? 'pong' : 'queued';
  }

  async #store(delivery: IncomingDelivery, fields: Record<string, unknown>, address: DeliveryAddress): Promise<void> {
    const { store, clock, log, onStored } = this.#deps;
    const installation = fields.installation as { id?: unknown } | undefined;
    const repository = fields.repository as { full_name?: unknown } | undefined;
    const text = (value: unknown) => (typeof value === 'string' ? value.slice(0, FIELD_LIMIT) : null);
    const installationId = installation?.id;
    const record: NewDelivery = {
      delivery_id: deliveryKey(address, delivery.id),
      event: delivery.event,
      action: text(fields.action),
      installation_id: installationNumber(installationId),
      repository: text(repository?.full_name),
      ref: text(fields.ref),
      after_sha: text(fields.after),
      workspace_id: address.kind === 'workspace' ? address.workspaceId : null,
      // The verified text; parsed again by the worker.
      payload: delivery.body,
      received_at: clock.now(),
      done: delivery.event === 'ping' ? { outcome: 'ignored', reason: 'A ping: GitHub reached this server and the signature matched.' } : undefined,
    };
    const stored = await store.insertDelivery(record);
    if (!stored) {
      log.info('webhooks: delivery already stored; nothing more to do', { delivery_id: delivery.id, event: delivery.event });
      return;
    }
    log.info('webhooks: delivery stored', { delivery_id: delivery.id, event: delivery.event, action: record.action, workspace_id: record.workspace_id });
    if (!record.done) onStored();
  }
}

/**
 * The installation a delivery names, for addressing it (who may see it in their log). A number in
 * a string ("4242") still names that installation, so its workspaces see the delivery and why it
 * was not built (the worker builds only from a real number); anything else addresses no one.
 */
function installationNumber(id: unknown): number | null {
  const value = typeof id === 'string' && /^[1-9][0-9]{0,15}$/.test(id) ? Number(id) : id;
  return Number.isSafeInteger(value) && (value as number) > 0 ? (value as number) : null;
}
