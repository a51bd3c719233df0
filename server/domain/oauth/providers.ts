import type { OAuthProvider, OAuthProviderCreate, OAuthProviderPatch } from '../../../shared/schemas/oauth.ts';
import type { SecretBox } from '../../crypto/secret-box.ts';
import type { OAuthStore, ProviderRecord } from '../../store/oauth.ts';
import type { Page } from '../../store/types.ts';
import type { Clock } from '../clock.ts';
import { BadRequest, NotFound } from '../errors.ts';
import type { TokenClient } from './token-request.ts';

/** OAuth providers of an organization. The client secret is sealed before it is stored and never leaves. */
export class OAuthProviders {
  readonly #store: OAuthStore;
  readonly #box: SecretBox;
  readonly #clock: Clock;

  constructor(deps: { store: OAuthStore; secretBox: SecretBox; clock: Clock }) {
    this.#store = deps.store;
    this.#box = deps.secretBox;
    this.#clock = deps.clock;
  }

  async create(organizationId: string, body: OAuthProviderCreate): Promise<OAuthProvider> {
    const now = this.#clock.now();
    const record: ProviderRecord = {
      id: crypto.randomUUID(),
      organization_id: organizationId,
      provider_id: body.provider_id,
      name: body.name,
      client_id: body.client_id,
      client_secret_sealed: this.#box.encrypt(body.client_secret),
      auth_url: body.auth_url,
      token_url: body.token_url,
      uses_pkce: body.uses_pkce,
      code_challenge_method: body.code_challenge_method,
      token_endpoint_auth_method: body.token_endpoint_auth_method,
      created_at: now,
      updated_at: now,
    };
    await this.#store.createProvider(record);
    return toPublic(record);
  }

  async list(organizationId: string, limit: number, offset: number): Promise<Page<OAuthProvider>> {
    const page = await this.#store.listProviders(organizationId, limit, offset);
    return { resources: page.resources.map(toPublic), offset: page.offset };
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
    if (redirectsSecret && body.client_secret == null) {
      throw new BadRequest('Changing token_url, auth_url or client_id requires client_secret to be sent again.');
    }
    const next: ProviderRecord = {
      ...current,
      name: body.name ?? current.name,
      client_id: body.client_id ?? current.client_id,
      client_secret_sealed: body.client_secret != null ? this.#box.encrypt(body.client_secret) : current.client_secret_sealed,
      auth_url: body.auth_url ?? current.auth_url,
      token_url: body.token_url ?? current.token_url,
      uses_pkce: body.uses_pkce ?? current.uses_pkce,
      code_challenge_method: body.code_challenge_method ?? current.code_challenge_method,
      token_endpoint_auth_method: body.token_endpoint_auth_method ?? current.token_endpoint_auth_method,
      updated_at: this.#clock.now(),
    };
    if (!(await this.#store.updateProvider(next))) throw notFound(id);
    return toPublic(next);
  }

  async delete(organizationId: string, id: string): Promise<void> {
    if (!(await this.#store.deleteProvider(organizationId, id))) throw notFound(id);
  }

  /** The stored provider by its `provider_id`, as `authenticate` names it. */
  async bySlug(organizationId: string, providerId: string): Promise<ProviderRecord> {
    const record = await this.#store.getProviderBySlug(organizationId, providerId);
    if (!record) throw new NotFound(`OAuth provider '${providerId}' not found.`);
    return record;
  }

  async record(organizationId: string, id: string): Promise<ProviderRecord> {
    const record = await this.#store.getProvider(organizationId, id);
    if (!record) throw notFound(id);
    return record;
  }

  /** What a token request needs, with the secret unsealed for just that request. */
  tokenClient(record: ProviderRecord): TokenClient {
    return {
      tokenUrl: record.token_url,
      clientId: record.client_id,
      clientSecret: this.#box.decrypt(record.client_secret_sealed),
      authMethod: record.token_endpoint_auth_method,
    };
  }
}

function notFound(id: string): NotFound {
  return new NotFound(`OAuth provider ID ${id} not found.`);
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
    created_at: record.created_at,
    updated_at: record.updated_at,
    provider_type: 'custom',
  };
}
