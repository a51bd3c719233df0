import type { Context } from 'hono';
import { z } from 'zod';
import { page } from '../../shared/schemas/common.ts';
import { WebhookAccepted, WebhookDelivery, WebhookDeliveryListQuery } from '../../shared/schemas/webhook-delivery.ts';
import { WebhookSecretCreated, WebhookSecretStatus } from '../../shared/schemas/webhook-secret.ts';
import { BadRequest, PayloadTooLarge, Unauthorized } from '../domain/errors.ts';
import { readLimited } from '../domain/read-limited.ts';
import type { DeliveryLog } from '../domain/webhooks/delivery-log.ts';
import { type DeliveryAddress, WEBHOOK_PATH, type WebhookIntake } from '../domain/webhooks/intake.ts';
import type { WorkspaceWebhookSecrets } from '../domain/webhooks/workspace-secrets.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** GitHub's own limit for a delivery's body. */
export const WEBHOOK_BODY_LIMIT = 25 * 1024 * 1024;
/** Where one workspace's repository webhooks deliver, signed with that workspace's own secret. */
export const WORKSPACE_WEBHOOK_PATH = `${WEBHOOK_PATH}/workspaces/:workspace_id`;
const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,200}$/;
// GitHub's event names are lower case with underscores and digits (`projects_v2_item`).
const EVENT_NAME = /^[a-z0-9_]{1,100}$/;

/** Why the delivery routes read their own input (route()'s escape hatch). */
const SIGNED_BYTES = 'the signature is checked over the raw bytes of the body before it is parsed, within the webhook memory budget';

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

/** Reads, checks and stores one delivery for the endpoint it came to (see `DeliveryAddress`). */
async function receiveDelivery(c: Context, intake: WebhookIntake, address: DeliveryAddress): Promise<Response> {
  // Refuse what cannot be right before reading the body: 503 unconfigured, 401 no secret, 413, 401, 400.
  await intake.secretsFor(address);
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
  const status = await intake.receive({ id, event, signature, body }, address);
  return c.json({ delivery_id: id, status }, status === 'pong' ? 200 : 202);
}

/**
 * `POST /v1/webhooks/github` (the GitHub App's, signed with the server's secret), `POST
 * /v1/webhooks/github/workspaces/{id}` (a workspace's repository webhooks, signed with its own
 * secret), both without an API key; the workspace's secret and delivery log, with one.
 */
/** What both delivery routes document alike: the signed body, GitHub's headers, the answers, the errors the intake gives. */
function deliveryDoc(secret: string, events: string) {
  return {
    body: z
      .object({})
      .catchall(z.unknown())
      .meta({ description: `The GitHub event payload (${events}, …), as GitHub sends it` }),
    headers: [
      { name: 'X-Hub-Signature-256', required: true, description: `\`sha256=<hex HMAC-SHA256 of the raw body with ${secret}>\`` },
      {
        name: 'X-GitHub-Event',
        required: true,
        description: `The event name (${events
          .split(', ')
          .map((e) => `\`${e}\``)
          .join(', ')}, …)`,
      },
      { name: 'X-GitHub-Delivery', required: true, description: 'The delivery id; a delivery sent again has the same one' },
    ],
    response: { status: 202, schema: WebhookAccepted, description: 'Stored (or already stored), processed after the answer' },
    responses: [{ status: 200, schema: WebhookAccepted, description: 'A `ping`: answered, nothing stored' }],
    // Not behind the API key, and the intake reads its body itself (not `readJson`): these are what it answers.
    errors: [400, 401, 413, 415, 503],
  };
}

export function webhookRoutes(ctx: RouteContext, feature: { intake: WebhookIntake; log: DeliveryLog; secrets: WorkspaceWebhookSecrets }): void {
  const tag = 'webhooks';
  route(
    ctx,
    {
      method: 'post',
      path: WEBHOOK_PATH,
      summary: "Receive a GitHub App delivery (push, installation, ping), signed with the server's secret; stored first, answered 202, processed after",
      tag,
      auth: 'webhook-signature',
      operationId: 'receive_github_webhook',
      ownInput: SIGNED_BYTES,
      description:
        'Signed with the webhook secret (`X-Hub-Signature-256`, checked on the raw body before it is parsed). Every accepted delivery is stored before the 202; the same `X-GitHub-Delivery` twice has one effect.',
      ...deliveryDoc('the webhook secret', 'push, installation, ping'),
    },
    (c) => receiveDelivery(c, feature.intake, { kind: 'app' }),
  );

  route(
    ctx,
    {
      method: 'post',
      path: WORKSPACE_WEBHOOK_PATH,
      summary: "Receive a repository webhook's delivery for one workspace, signed with that workspace's secret; it builds only that workspace's deployments",
      tag,
      auth: 'webhook-signature',
      description:
        "Signed with the workspace's own repository-webhook secret (`POST /v1/webhooks/github/secret`). An unknown workspace, one without a secret, and a wrong signature all answer the same 401.",
      // Any text: an id that names no workspace is answered like a wrong signature, never told apart.
      pathParams: { workspace_id: z.string() },
      ownInput: SIGNED_BYTES,
      ...deliveryDoc("the workspace's secret", 'push, ping'),
    },
    (c) => receiveDelivery(c, feature.intake, { kind: 'workspace', workspaceId: c.req.param('workspace_id') ?? '' }),
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: `${WEBHOOK_PATH}/secret`,
      summary: "Create or rotate the workspace's repository-webhook secret; the value is shown in this answer only",
      tag,
      response: { status: 201, schema: WebhookSecretCreated },
    },
    async (c) => {
      const created = await feature.secrets.rotate(c.get('principal').workspaceId);
      c.header('cache-control', 'no-store');
      return c.json(created, 201);
    },
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: `${WEBHOOK_PATH}/secret`,
      summary: "The workspace's repository-webhook secret: its Payload URL and dates, never its value",
      tag,
      response: { status: 200, schema: WebhookSecretStatus },
      // 404 while the workspace has no secret.
      errors: [401, 403, 404, 429, 503],
    },
    async (c) => c.json(await feature.secrets.status(c.get('principal').workspaceId)),
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: `${WEBHOOK_PATH}/secret`,
      summary: "Remove the workspace's repository-webhook secret: its repository webhooks are refused from then on",
      tag,
      response: { status: 204, schema: null },
      // 404 when the workspace has no secret to remove.
      errors: [401, 403, 404, 429, 503],
    },
    async (c) => {
      await feature.secrets.remove(c.get('principal').workspaceId);
      return c.body(null, 204);
    },
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: `${WEBHOOK_PATH}/deliveries`,
      summary: "The workspace's GitHub delivery log, newest first: what each delivery built or why not",
      tag,
      query: WebhookDeliveryListQuery,
      response: { status: 200, schema: page(WebhookDelivery) },
    },
    async (c, { query }) => c.json(await feature.log.list(c.get('principal').workspaceId, query)),
  );
}
