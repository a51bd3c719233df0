import type { Context } from 'hono';
import { page } from '../../shared/schemas/common.ts';
import { WebhookAccepted, WebhookDelivery, WebhookDeliveryListQuery } from '../../shared/schemas/webhook-delivery.ts';
import { BadRequest, PayloadTooLarge, Unauthorized } from '../domain/errors.ts';
import type { DeliveryLog } from '../domain/webhooks/delivery-log.ts';
import type { WebhookIntake } from '../domain/webhooks/intake.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { readQuery } from '../http/validation.ts';
import { readLimited } from '../lib/read-limited.ts';

/** GitHub's own limit for a delivery's body. */
export const WEBHOOK_BODY_LIMIT = 25 * 1024 * 1024;
export const WEBHOOK_PATH = '/v1/webhooks/github';
const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,200}$/;
const EVENT_NAME = /^[a-z_]{1,100}$/;

/** How much of an oversized body is read and thrown away, so the client can read the 413. */
const DRAIN_LIMIT = 64 * 1024 * 1024;

/** The body, or the 413 to answer (a client that was still sending is told why, not cut off). */
async function readBody(c: Context): Promise<Uint8Array | Response> {
  try {
    return await readLimited(c.req.raw, WEBHOOK_BODY_LIMIT, { drainUpTo: DRAIN_LIMIT, budget: c.get('bodyBudget') });
  } catch (error) {
    if (error instanceof PayloadTooLarge) return tooLarge(c, error.drained);
    throw error;
  }
}

function tooLarge(c: Context, drained: boolean): Response {
  // What was not read is still on its way: do not let the client reuse this connection.
  if (!drained) c.header('connection', 'close');
  return c.json({ detail: `The body is larger than GitHub's limit of ${WEBHOOK_BODY_LIMIT} bytes.` }, 413);
}

/** `POST /v1/webhooks/github` (signature-checked, no API key) and the workspace's delivery log. */
export function webhookRoutes(ctx: RouteContext, feature: { intake: WebhookIntake; log: DeliveryLog }): void {
  const tag = 'webhooks';
  route(
    ctx,
    {
      method: 'post',
      path: WEBHOOK_PATH,
      summary: 'Receive a GitHub delivery (push, installation, ping); stored first, answered 202, processed after',
      tag,
      auth: false,
      response: { status: 202, schema: WebhookAccepted, description: 'Stored (or already stored); `ping` answers 200' },
    },
    async (c) => {
      // Refuse what cannot be right before reading the body: 503 unconfigured, 413, 401, 400.
      await feature.intake.ensureConfigured();
      const declared = Number(c.req.header('content-length') ?? '0');
      if (declared > DRAIN_LIMIT) return tooLarge(c, false);
      if (declared > WEBHOOK_BODY_LIMIT) {
        const read = await readBody(c);
        return read instanceof Response ? read : tooLarge(c, true);
      }
      const signature = c.req.header('x-hub-signature-256');
      if (!signature) throw new Unauthorized('The X-Hub-Signature-256 header is missing: set a secret on the GitHub webhook.');
      const event = c.req.header('x-github-event');
      const id = c.req.header('x-github-delivery');
      if (!event || !EVENT_NAME.test(event)) throw new BadRequest('The X-GitHub-Event header is missing or malformed.');
      if (!id || !DELIVERY_ID.test(id)) throw new BadRequest('The X-GitHub-Delivery header is missing or malformed.');
      const bytes = await readBody(c);
      if (bytes instanceof Response) return bytes;
      // The signature is checked on this text; GitHub sends UTF-8, and bytes that are not would decode
      // to U+FFFD and fail the check rather than pass it.
      const body = new TextDecoder('utf-8').decode(bytes);
      const status = await feature.intake.receive({ id, event, signature, body });
      return c.json({ delivery_id: id, status }, status === 'pong' ? 200 : 202);
    },
  );

  route(
    ctx,
    {
      method: 'get',
      path: `${WEBHOOK_PATH}/deliveries`,
      summary: "The workspace's GitHub delivery log, newest first: what each delivery built or why not",
      tag,
      query: WebhookDeliveryListQuery,
      response: { status: 200, schema: page(WebhookDelivery) },
    },
    async (c) => c.json(await feature.log.list(c.get('principal').workspaceId, readQuery(c, WebhookDeliveryListQuery))),
  );
}
