import { Webhooks, type EmitterWebhookEvent } from '@octokit/webhooks';
import type { Logger } from '../../logger.ts';
import type { NewDelivery, WebhookStore } from '../../store/webhooks.ts';
import type { Clock } from '../clock.ts';
import { DomainError, Unauthorized, Unavailable, UnsupportedMediaType } from '../errors.ts';

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

/** An error thrown by our own handler, told apart from the library's verification and parse errors. */
class HandlerFailure extends Error {
  override readonly cause: unknown;
  constructor(cause: unknown) {
    super('storing the delivery failed');
    this.cause = cause;
  }
}

/**
 * Accepts GitHub deliveries: `@octokit/webhooks` checks the signature on the raw text (current
 * secret, then the previous ones) and only then parses it; the one handler, registered here once,
 * stores the delivery as pending. Processing happens later, in the delivery worker.
 */
export class WebhookIntake {
  readonly #webhooks: Webhooks | null;
  readonly #deps: { store: WebhookStore; clock: Clock; log: Logger; onStored: () => void };

  constructor(deps: { secret: string | undefined; previousSecrets: string[]; store: WebhookStore; clock: Clock; log: Logger; onStored: () => void }) {
    this.#deps = deps;
    this.#webhooks = deps.secret ? new Webhooks({ secret: deps.secret, additionalSecrets: deps.previousSecrets }) : null;
    this.#webhooks?.onAny(async (event) => {
      try {
        await this.#store(event);
      } catch (error) {
        throw new HandlerFailure(error);
      }
    });
  }

  /** Throws `Unavailable` (503) when no secret is configured, so nothing is accepted unsigned. */
  async ensureConfigured(): Promise<Webhooks> {
    if (!this.#webhooks) {
      throw new Unavailable('GitHub webhooks are not configured on this server: set GITHUB_WEBHOOK_SECRET to the secret entered in GitHub.');
    }
    return this.#webhooks;
  }

  /** Verifies and stores one delivery; `ping` is stored as done. Throws a domain error for a refused one. */
  async receive(delivery: IncomingDelivery): Promise<'queued' | 'pong'> {
    const webhooks = await this.ensureConfigured();
    try {
      await webhooks.verifyAndReceive({ id: delivery.id, name: delivery.event, payload: delivery.body, signature: delivery.signature });
    } catch (error) {
      throw classify(error);
    }
    return delivery.event === 'ping' ? 'pong' : 'queued';
  }

  async #store(event: EmitterWebhookEvent): Promise<void> {
    const { store, clock, log, onStored } = this.#deps;
    const payload = event.payload as unknown;
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
      throw new UnsupportedMediaType('The body must be a JSON object.');
    }
    const fields = payload as Record<string, unknown>;
    const installation = fields.installation as { id?: unknown } | undefined;
    const repository = fields.repository as { full_name?: unknown } | undefined;
    const text = (value: unknown) => (typeof value === 'string' ? value : null);
    const record: NewDelivery = {
      delivery_id: event.id,
      event: event.name,
      action: text(fields.action),
      installation_id: typeof installation?.id === 'number' ? installation.id : null,
      repository: text(repository?.full_name),
      ref: text(fields.ref),
      after_sha: text(fields.after),
      // The verified value; stored as JSON text and parsed again by the worker.
      payload: JSON.stringify(payload),
      received_at: clock.now(),
      done: event.name === 'ping' ? { outcome: 'ignored', reason: 'A ping: GitHub reached this server and the signature matched.' } : undefined,
    };
    const stored = await store.insertDelivery(record);
    if (!stored) {
      log.info('webhooks: delivery already stored; nothing more to do', { delivery_id: event.id, event: event.name });
      return;
    }
    log.info('webhooks: delivery stored', { delivery_id: event.id, event: event.name, action: record.action });
    if (!record.done) onStored();
  }
}

/** Sorts what `verifyAndReceive` rejected with: a bad signature (401), our handler's failure, or a body that is not JSON (415). */
function classify(error: unknown): unknown {
  const inner = error instanceof AggregateError ? error.errors : [error];
  const ours = inner.find((e): e is HandlerFailure => e instanceof HandlerFailure);
  if (ours) return ours.cause;
  if (inner.some((e) => e instanceof Error && /signature does not match/i.test(e.message))) {
    return new Unauthorized('The X-Hub-Signature-256 signature does not match the body for the configured webhook secret.');
  }
  if (inner.some((e) => e instanceof DomainError)) return inner.find((e) => e instanceof DomainError);
  // The library's JSON.parse failed, or the JSON was not an object it could dispatch.
  return new UnsupportedMediaType('The body is not JSON: set the webhook\'s content type to application/json in GitHub.');
}
