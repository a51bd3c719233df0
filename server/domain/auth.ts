import type { ApiKey, ApiKeyCreate, ApiKeyCreated } from '../../shared/schemas/api-key.ts';
import type { Workspace } from '../../shared/schemas/workspace.ts';
import { digestBytes, generateApiKey, hashApiKey, sameDigestBytes } from '../crypto/api-key.ts';
import type { Clock } from '../lib/clock.ts';
import { auditSubject } from '../lib/request-scope.ts';
import type { ApiKeyRecord, ApiKeyStore, WorkspaceStore } from '../store/types.ts';
import type { AuthThrottle } from './auth-throttle.ts';
import { Forbidden, NotFound, Unauthorized } from './errors.ts';

/** Who is calling, and in which workspace. */
export type Principal = {
  keyId: string;
  organizationId: string;
  workspaceId: string;
  /** Whether the key may act for the whole organization (create workspaces and keys). */
  organizationScoped: boolean;
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** How many presented keys keep their SHA-256 in memory (the keys of recent successful requests). */
const HASHED_KEYS_KEPT = 1024;

/**
 * A digest as the map look-ups need it (hex) and as the constant-time comparison needs it (bytes),
 * each made once; `cached`: the key's entry in the cache of found keys once it is there, so the
 * fast lane's check is one map look-up and the comparison. Both maps lose the key together
 * (`invalidateKey`, `invalidateAll`), so the link never outlives the cached entry.
 */
type Digest = { hex: string; bytes: Buffer; cached?: CachedKey };
/**
 * A key found in the database, with its stored hash's bytes for the comparison on every request,
 * and its principal without X-Tenant-Id once known (frozen: one object for all its requests).
 */
type CachedKey = { record: ApiKeyRecord; storedHash: Buffer; principal?: Readonly<Principal> };

function digestOf(key: string): Digest {
  const hex = hashApiKey(key);
  return { hex, bytes: digestBytes(hex) };
}

/**
 * API keys and workspaces. Keys are looked up by their SHA-256 hash; found keys are cached in
 * memory, and a revoked key leaves the cache at once, so revocation holds from the next request.
 */
export class Auth {
  readonly #store: ApiKeyStore & WorkspaceStore;
  readonly #clock: Clock;
  readonly #keys = new Map<string, CachedKey>();
  readonly #workspaces = new Map<string, Workspace & { is_default: boolean }>();
  /** An organization's default workspace never changes, so it is looked up once. */
  readonly #defaultWorkspaces = new Map<string, Workspace>();
  readonly #throttle: AuthThrottle | undefined;
  /**
   * Presented key → its SHA-256, for keys that authenticated: hashing costs more than the rest of
   * a cached check. Only the hash is remembered, never whether the key is valid: that is still the
   * hash → record map below, which revocation clears, so a revoked key fails on its next request.
   * A Map's string keys are hashed by V8 with a per-process random seed (no chosen collisions); the
   * map is bounded, oldest entry out first. The keys live in this process's memory only, as they do
   * while each request is read; they are never logged or written anywhere.
   */
  readonly #hashes = new Map<string, Digest>();
  /** Counts invalidations: a look-up that read the database before one does not cache what it read. */
  #generation = 0;
  /** The other processes on the database, when there are any (see `sharedWith`). */
  #peers: AuthPeers | undefined;

  constructor(deps: { store: ApiKeyStore & WorkspaceStore; clock: Clock; throttle?: AuthThrottle }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#throttle = deps.throttle;
  }

  /**
   * The caller of a request. `clientAddress` (the TCP peer) is throttled on failed keys; requests
   * without one (in-process calls) are not.
   */
  async authenticate(key: string | undefined, tenantHeaderRaw: string | undefined, clientAddress?: string): Promise<Principal> {
    if (!key) throw new Unauthorized('Missing API key: send it in the X-Api-Key header or as Authorization: Bearer <key>.');
    const presented = this.#hashes.get(key) ?? digestOf(key);
    const hash = presented.hex;
    this.#throttle?.admit(clientAddress, hash);
    // A key in the cache needs no await (the usual case): one awaited layer fewer per request.
    const found = this.#keys.get(hash) ?? (await this.#lookUp(hash));
    // The look-up was by hash; compare the stored hash in constant time as well, so acceptance never
    // rests on an index or map look-up alone.
    if (!found || !sameDigestBytes(found.storedHash, presented.bytes)) {
      this.#throttle?.failed(clientAddress);
      throw new Unauthorized('Invalid or revoked API key.');
    }
    const record = found.record;
    if (this.#expired(record)) throw new Unauthorized('This API key has expired (keys minted from a GitHub Actions token last at most an hour).');
    this.#throttle?.succeeded(clientAddress, hash);
    if (!this.#hashes.has(key)) {
      if (this.#hashes.size >= HASHED_KEYS_KEPT) this.#hashes.delete(this.#hashes.keys().next().value!);
      this.#hashes.set(key, presented);
    }
    // Only an entry the cache holds (not one read while other processes' revokes could go unheard).
    if (presented.cached !== found && this.#keys.get(hash) === found) presented.cached = found;
    return this.#principal(record, tenantHeaderRaw);
  }

  /**
   * The caller when everything needed is already in memory (a key that authenticated before, its
   * record, its organization's default workspace) and no X-Tenant-Id is sent; otherwise undefined,
   * and the caller goes the usual way (`authenticate`), which also makes every error. For the HTTP
   * fast path, which answers without awaiting anything but the row it reads. Same checks (the
   * constant-time comparison included, on digests' bytes made when cached) and same throttle
   * bookkeeping as `authenticate`.
   */
  cachedPrincipal(key: string | undefined, tenantHeaderRaw: string | undefined, clientAddress?: string): Readonly<Principal> | undefined {
    if (!key || tenantHeaderRaw !== undefined) return undefined;
    const presented = this.#hashes.get(key);
    const found = presented?.cached;
    if (!presented || !found || !sameDigestBytes(found.storedHash, presented.bytes) || this.#expired(found.record)) return undefined;
    // Made once per cached key; unknown here (an organization key's default workspace not read yet):
    // `authenticate` does the bookkeeping. Dropped with the key (`invalidateKey`, `invalidateAll`).
    const principal = (found.principal ??= frozen(this.#principalFromMemory(found.record)));
    if (!principal) return undefined;
    return (this.#throttle?.admitKnownKey(clientAddress, presented.hex) ?? true) ? principal : undefined;
  }

  /** Minted keys end on their own: checked on every request, cached or not (an ordinary key has no `expires_at`). */
  #expired(record: ApiKeyRecord): boolean {
    return record.expires_at !== undefined && record.expires_at <= this.#clock.now();
  }

  async #lookUp(hash: string): Promise<CachedKey | undefined> {
    const generation = this.#generation;
    const record = await this.#store.findApiKeyByHash(hash);
    if (!record || record.revoked) return undefined;
    const found = { record, storedHash: digestBytes(record.key_hash) };
    // Not cached while revocations from other processes could go unheard (see `sharedWith`).
    if (generation === this.#generation && (this.#peers?.listening() ?? true)) this.#keys.set(hash, found);
    return found;
  }

  /** Synchronous when everything it needs is cached (the usual case). */
  #principal(record: ApiKeyRecord, tenantHeaderRaw: string | undefined): Principal | Promise<Principal> {
    const tenantHeader = tenantHeaderRaw?.trim().toLowerCase();
    if (!tenantHeader) return this.#principalFromMemory(record) ?? this.#principalLookingUp(record, undefined);
    if (record.workspace_id) {
      if (tenantHeader !== record.workspace_id)
        throw new Forbidden('This API key belongs to one workspace and may not use the workspace named in X-Tenant-Id.');
      return this.#principalFromMemory(record)!;
    }
    return this.#principalLookingUp(record, tenantHeader);
  }

  /**
   * The principal of a key used without X-Tenant-Id when nothing needs reading: a workspace key's
   * own workspace, an organization key's default workspace once looked up; undefined otherwise.
   */
  #principalFromMemory(record: ApiKeyRecord): Principal | undefined {
    if (record.workspace_id) return { keyId: record.id, organizationId: record.organization_id, workspaceId: record.workspace_id, organizationScoped: false };
    const workspace = this.#defaultWorkspaces.get(record.organization_id);
    return workspace ? { keyId: record.id, organizationId: record.organization_id, workspaceId: workspace.id, organizationScoped: true } : undefined;
  }

  async #principalLookingUp(record: ApiKeyRecord, tenantHeader: string | undefined): Promise<Principal> {
    if (tenantHeader) {
      const workspace = UUID.test(tenantHeader) ? await this.#workspace(tenantHeader) : null;
      if (!workspace || workspace.organization_id !== record.organization_id) {
        throw new Forbidden('This API key may not use the workspace named in X-Tenant-Id.');
      }
      return { keyId: record.id, organizationId: record.organization_id, workspaceId: workspace.id, organizationScoped: true };
    }
    let workspace = this.#defaultWorkspaces.get(record.organization_id) ?? null;
    if (!workspace) {
      workspace = await this.#store.getDefaultWorkspace(record.organization_id);
      if (workspace) this.#defaultWorkspaces.set(record.organization_id, workspace);
    }
    if (!workspace) throw new Forbidden('The organization of this API key has no default workspace.');
    return { keyId: record.id, organizationId: record.organization_id, workspaceId: workspace.id, organizationScoped: true };
  }

  async #workspace(id: string) {
    let workspace = this.#workspaces.get(id);
    if (!workspace) {
      workspace = (await this.#store.getWorkspace(id)) ?? undefined;
      if (workspace) this.#workspaces.set(id, workspace);
    }
    return workspace ?? null;
  }

  async createWorkspace(principal: Principal, name: string): Promise<Workspace> {
    requireOrganizationScope(principal, 'create workspaces');
    const workspace: Workspace = { id: crypto.randomUUID(), name, organization_id: principal.organizationId, created_at: this.#clock.now() };
    auditSubject(workspace.id);
    await this.#store.createWorkspace(workspace);
    return workspace;
  }

  listWorkspaces(principal: Principal): Promise<Workspace[]> {
    if (!principal.organizationScoped) {
      return this.#store
        .getWorkspace(principal.workspaceId)
        .then((w) => (w ? [{ id: w.id, name: w.name, organization_id: w.organization_id, created_at: w.created_at }] : []));
    }
    return this.#store.listWorkspaces(principal.organizationId);
  }

  async createApiKey(principal: Principal, body: ApiKeyCreate): Promise<ApiKeyCreated> {
    requireOrganizationScope(principal, 'create API keys');
    const workspaceId = body.workspace_id ?? null;
    if (workspaceId) {
      const workspace = await this.#workspace(workspaceId);
      if (!workspace || workspace.organization_id !== principal.organizationId) throw new NotFound(`Workspace ID ${workspaceId} not found.`);
    }
    const key = generateApiKey();
    const record: ApiKey = {
      id: crypto.randomUUID(),
      workspace_id: workspaceId,
      organization_id: principal.organizationId,
      description: body.description ?? null,
      created_at: this.#clock.now(),
    };
    auditSubject(record.id);
    await this.#store.createApiKey({ ...record, key_hash: hashApiKey(key) });
    return { ...record, key };
  }

  async listApiKeys(principal: Principal): Promise<ApiKey[]> {
    const now = this.#clock.now();
    // Expired minted keys work nowhere any more, so they are not listed (their rows stay, for the record).
    const keys = (await this.#store.listApiKeys(principal.organizationId)).filter((key) => key.expires_at === undefined || key.expires_at > now);
    return principal.organizationScoped ? keys : keys.filter((key) => key.workspace_id === principal.workspaceId);
  }

  async revokeApiKey(principal: Principal, id: string): Promise<void> {
    requireOrganizationScope(principal, 'revoke API keys');
    if (!(await this.#store.revokeApiKey(principal.organizationId, id, this.#clock.now()))) throw new NotFound(`API key ID ${id} not found.`);
    this.invalidateKey(id);
    // The answer waits until the other processes have dropped the key too: the client's next
    // request, to whichever process, is refused.
    await this.#peers?.announceRevoked(id);
  }

  /** Drops what is cached of key `id` (revoked here or, as another process tells, elsewhere). */
  invalidateKey(id: string): void {
    this.#generation += 1;
    const hashes = new Set<string>();
    for (const [hash, found] of this.#keys) if (found.record.id === id) hashes.add(hash);
    for (const hash of hashes) this.#keys.delete(hash);
    for (const [key, presented] of this.#hashes) if (hashes.has(presented.hex)) this.#hashes.delete(key);
  }

  /** Drops every cache (notices from other processes may have been missed). */
  invalidateAll(): void {
    this.#generation += 1;
    this.#keys.clear();
    this.#hashes.clear();
    this.#workspaces.clear();
    this.#defaultWorkspaces.clear();
  }

  /** Several processes on one database: how a revoke reaches the others, and whether their revokes can reach this one. */
  sharedWith(peers: AuthPeers): void {
    this.#peers = peers;
  }
}

/**
 * The other processes, for the caches: `announceRevoked` resolves once they have dropped the key
 * (the revoke answers after it); while `listening()` is false their revokes could go unheard, so
 * keys are read from the database on every request instead of being cached.
 */
export type AuthPeers = { announceRevoked(keyId: string): Promise<unknown>; listening(): boolean };

function frozen<T extends object>(value: T | undefined): Readonly<T> | undefined {
  return value && Object.freeze(value);
}

/** Refuses a workspace-scoped key an action that affects the whole organization. */
export function requireOrganizationScope(principal: Principal, what: string): void {
  if (!principal.organizationScoped) throw new Forbidden(`Only an organization-scoped API key may ${what}.`);
}
