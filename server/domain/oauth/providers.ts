import type { OAuthProvider, OAuthProviderCreate, OAuthProviderPatch } from '../../../shared/schemas/oauth.ts';
import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Clock } from '../../lib/clock.ts';
import type { OAuthStore, ProviderRecord } from '../../store/oauth.ts';
import { BadRequest, NotFound, ValidationFailed } from '../errors.ts';
import type { OutboundPolicy } from './outbound.ts';
import type { TokenClient } from './token-request.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** OAuth providers of an organization. The client secret is sealed before it is stored and never leaves. */
export class OAuthProviders {
  readonly #store: OAuthStore;
  readonly #box: SecretBox;
  readonly #clock: Clock;
  readonly #policy: OutboundPolicy;

  constructor(deps: { store: OAuthStore; secretBox: SecretBox; clock: Clock; policy: OutboundPolicy }) {
    this.#store = deps.store;
    this.#box = deps.secretBox;
    this.#clock = deps.clock;
    this.#policy = deps.policy;
  }

  /** Refuses endpoints on hosts the server may not contact (SSRF), naming the field (422). */
  async #checkEndpoints(urls: { auth_url?: string | null; token_url?: string | null }): Promise<void> {
    const issues = [];
    for (const field of ['auth_url', 'token_url'] as const) {
      const url = urls[field];
      if (url == null) continue;
      const refusal = await this.#policy.refusal(url);
      if (refusal !== null) issues.push({ loc: ['body', field], msg: refusal, type: 'value_error' });
    }
    if (issues.length > 0) throw new ValidationFailed(issues);
  }

  async create(organizationId: string, body: OAuthProviderCreate): Promise<OAuthProvider> {
    await this.#checkEndpoints(body);
    const now = this.#clock.now();
    const record: ProviderRecord = {
      id: crypto.randomUUID(),
      organization_id: organizationId,
      provider_id: body.provider_id,
      name: body.name,
      client_id: body.client_id,
      client_secret_sealed: body.client_secret == null ? null : this.#box.encrypt(body.client_secret),
      auth_url: body.auth_url,
      token_url: body.token_url,
      uses_pkce: body.uses_pkce,
      code_challenge_method: body.code_challenge_method,
      token_endpoint_auth_method: body.token_endpoint_auth_method,
      provider_type: body.provider_type ?? null,
      created_at: now,
      updated_at: now,
    };
    await this.#store.createProvider(record);
    return toPublic(record);
  }

  async list(organizationId: string): Promise<OAuthProvider[]> {
    return (await this.#store.listProviders(organizationId)).map(toPublic);
  }

  async get(organizationId: string, id: string): Promise<OAuthProvider> {
    return toPublic(await this.record(organizationId, id));
  }

  async patch(organizationId: string, id: string, body: OAuthProviderPatch): Promise<OAuthProvider> {
    const current = await this.record(organizationId, id);
    if (body.provider_id != null && body.provider_id !== current.provider_id) {
      throw new BadRequest('provider_id cannot be changed; create a new provider instead.');
    }
    // The stored secret was given for one client at one token endpoint: never send it elsewhere.
    const redirectsSecret =
      (body.token_url != null && body.token_url !== current.token_url) ||
      (body.auth_url != null && body.auth_url !== current.auth_url) ||
      (body.client_id != null && body.client_id !== current.client_id);
    const authMethod = body.token_endpoint_auth_method ?? current.token_endpoint_auth_method;
    if (redirectsSecret && body.client_secret == null && authMethod !== 'none') {
      throw new BadRequest('Changing token_url, auth_url or client_id requires client_secret to be sent again.');
    }
    if (authMethod === 'none' && body.client_secret != null) {
      throw new BadRequest('A public client (token_endpoint_auth_method none) has no client_secret.');
    }
    if (authMethod === 'none' && !(body.uses_pkce ?? current.uses_pkce)) {
      throw new BadRequest('A public client (token_endpoint_auth_method none) must use PKCE.');
    }
    if (authMethod !== 'none' && body.client_secret == null && current.client_secret_sealed === null) {
      throw new BadRequest(`token_endpoint_auth_method ${authMethod} needs a client_secret; send one.`);
    }
    await this.#checkEndpoints(body);
    const secret = authMethod === 'none' ? null : body.client_secret != null ? this.#box.encrypt(body.client_secret) : current.client_secret_sealed;
    const next: ProviderRecord = {
      ...current,
      name: body.name ?? current.name,
      client_id: body.client_id ?? current.client_id,
      client_secret_sealed: secret,
      auth_url: body.auth_url ?? current.auth_url,
      token_url: body.token_url ?? current.token_url,
      uses_pkce: body.uses_pkce ?? current.uses_pkce,
      code_challenge_method: body.code_challenge_method ?? current.code_challenge_method,
      token_endpoint_auth_method: authMethod,
      provider_type: body.provider_type ?? current.provider_type,
      updated_at: this.#clock.now(),
    };
    if (!(await this.#store.updateProvider(next))) throw notFound(id);
    return toPublic(next);
  }

  async delete(organizationId: string, id: string): Promise<ProviderRecord> {
    const current = await this.record(organizationId, id);
    if (!(await this.#store.deleteProvider(organizationId, current.id))) throw notFound(id);
    return current;
  }

  /** The stored provider by its `provider_id`, as `authenticate` names it. */
  async bySlug(organizationId: string, providerId: string): Promise<ProviderRecord> {
    const record = await this.#store.getProviderBySlug(organizationId, providerId);
    if (!record) throw new NotFound(`OAuth provider '${providerId}' not found.`);
    return record;
  }

  /**
   * The stored provider named in a path: by its slug (`provider_id`, as the hosted API's clients
   * send it) or by its uuid `id`. A uuid is tried as an id first, then as a slug.
   */
  async record(organizationId: string, ref: string): Promise<ProviderRecord> {
    const byId = UUID.test(ref) ? await this.#store.getProvider(organizationId, ref.toLowerCase()) : null;
    const record = byId ?? (await this.#store.getProviderBySlug(organizationId, ref));
    if (!record) throw notFound(ref);
    return record;
  }

  /** The stored provider by its uuid only (a flow's or token's reference). */
  async byRef(organizationId: string, id: string): Promise<ProviderRecord> {
    const record = await this.#store.getProvider(organizationId, id);
    if (!record) throw notFound(id);
    return record;
  }

  /** What a token request needs, with the secret unsealed for just that request. */
  tokenClient(record: ProviderRecord): TokenClient {
    return {
      tokenUrl: record.token_url,
      clientId: record.client_id,
      clientSecret: record.client_secret_sealed === null ? null : this.#box.decrypt(record.client_secret_sealed),
      authMethod: record.token_endpoint_auth_method,
    };
  }
}

function notFound(id: string): NotFound {
  return new NotFound(`OAuth provider ${id} not found.`);
}

/** The API shape: everything but the sealed secret. */
export function toPublic(record: ProviderRecord): OAuthProvider {
  return {
    id: record.id,
    organization_id: record.organization_id,
    provider_id: record.provider_id,
    name: record.name,
    client_id: record.client_id,
    auth_url: record.auth_url,
    token_url: record.token_url,
    uses_pkce: record.uses_pkce,
    code_challenge_method: record.code_challenge_method,
    token_endpoint_auth_method: record.token_endpoint_auth_method,
    provider_type: record.provider_type,
    mcp_server_url: null,
    is_dynamic_client: false,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}
