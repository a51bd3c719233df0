import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import type { StoredWebhookSecret, WebhookSecretStore } from '../../store/webhook-secrets.ts';
import { NotFound } from '../errors.ts';

/**
 * How long the secret a rotation replaced is still accepted: time to paste the new one into
 * GitHub's webhook settings. A second rotation drops it at once (only one previous secret is kept).
 */
export const PREVIOUS_SECRET_GRACE_MS = 24 * 60 * 60 * 1000;

export type WebhookSecretStatus = {
  /** Where the workspace's repository webhooks deliver (GitHub's "Payload URL"). */
  payload_url: string;
  created_at: string;
  previous_secret_valid_until: string | null;
};

/**
 * Each workspace's own repository-webhook secret: a delivery that names no installation is
 * verified with it and reaches only that workspace. Kept encrypted; the decrypted values of the
 * workspaces that receive deliveries are cached in memory (one server process per database) and
 * dropped on every rotation or removal.
 */
export class WorkspaceWebhookSecrets {
  readonly #deps: { store: WebhookSecretStore; secretBox: SecretBox; clock: Clock; log: Logger; payloadUrl: (tenantId: string) => string };
  readonly #cache = new Map<string, { current: string; previous: string | null; previousValidUntil: string | null }>();

  constructor(deps: { store: WebhookSecretStore; secretBox: SecretBox; clock: Clock; log: Logger; payloadUrl: (tenantId: string) => string }) {
    this.#deps = deps;
  }

  /** Creates the workspace's secret, or rotates it; the only time the value is shown. */
  async rotate(tenantId: string): Promise<WebhookSecretStatus & { secret: string }> {
    const { store, secretBox, clock, log } = this.#deps;
    const secret = randomBytes(32).toString('hex');
    const now = clock.now();
    const validUntil = new Date(Date.parse(now) + PREVIOUS_SECRET_GRACE_MS).toISOString();
    const stored = await store.rotate(tenantId, secretBox.encrypt(secret), validUntil, now);
    this.#cache.delete(tenantId);
    log.info('webhooks: workspace webhook secret set', { workspace_id: tenantId, rotated: stored.previous_secret_enc !== null });
    return { secret, ...this.#status(tenantId, stored) };
  }

  /** The secret's metadata, never its value; NotFound when the workspace has none. */
  async status(tenantId: string): Promise<WebhookSecretStatus> {
    const stored = await this.#deps.store.get(tenantId);
    if (!stored) throw new NotFound('This workspace has no repository-webhook secret: create one with POST /v1/webhooks/github/secret.');
    return this.#status(tenantId, stored);
  }

  /** Removes the secret: the workspace's repository webhooks are refused (401) from now on. */
  async remove(tenantId: string): Promise<void> {
    const removed = await this.#deps.store.remove(tenantId);
    this.#cache.delete(tenantId);
    if (!removed) throw new NotFound('This workspace has no repository-webhook secret.');
    this.#deps.log.info('webhooks: workspace webhook secret removed', { workspace_id: tenantId });
  }

  /** The secrets a delivery for this workspace may be signed with now (current first); empty when none. */
  async accepted(tenantId: string): Promise<string[]> {
    let entry = this.#cache.get(tenantId);
    if (!entry) {
      const stored = await this.#deps.store.get(tenantId);
      // Only workspaces that have a secret are cached, so the cache is bounded by the workspaces.
      if (!stored) return [];
      const { secretBox } = this.#deps;
      entry = {
        current: secretBox.decrypt(stored.secret_enc),
        previous: stored.previous_secret_enc ? secretBox.decrypt(stored.previous_secret_enc) : null,
        previousValidUntil: stored.previous_valid_until,
      };
      this.#cache.set(tenantId, entry);
    }
    const previousValid = entry.previous !== null && entry.previousValidUntil !== null && this.#deps.clock.now() < entry.previousValidUntil;
    return previousValid ? [entry.current, entry.previous!] : [entry.current];
  }

  #status(tenantId: string, stored: StoredWebhookSecret): WebhookSecretStatus {
    const validUntil =
      stored.previous_secret_enc && stored.previous_valid_until && this.#deps.clock.now() < stored.previous_valid_until ? stored.previous_valid_until : null;
    return { payload_url: this.#deps.payloadUrl(tenantId), created_at: stored.created_at, previous_secret_valid_until: validUntil };
  }
}
