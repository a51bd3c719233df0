import type { Listener, ListenerCreate, ListenerPatch } from '../../shared/schemas/listener.ts';
import type { Clock } from '../lib/clock.ts';
import { auditSubject } from '../lib/request-scope.ts';
import type { ListenerRecord, ListenerStore, Page } from '../store/types.ts';
import { Conflict, NotFound } from './errors.ts';

/** Listeners: where `external_docker` deployments run (`sandbox` here, `k8s` through an agent). */
export class Listeners {
  private readonly deps: { store: ListenerStore; clock: Clock };

  constructor(deps: { store: ListenerStore; clock: Clock }) {
    this.deps = deps;
  }

  async create(tenantId: string, body: ListenerCreate): Promise<Listener> {
    const now = this.deps.clock.now();
    const listener: Listener = {
      id: crypto.randomUUID(),
      tenant_id: tenantId,
      version: body.version ?? null,
      compute_type: body.compute_type,
      compute_id: body.compute_id,
      compute_config: computeConfigOf(body.compute_config),
      created_at: now,
      updated_at: now,
    };
    auditSubject(listener.id);
    await this.deps.store.createListener(listener);
    return listener;
  }

  async get(tenantId: string, id: string): Promise<ListenerRecord> {
    const listener = await this.deps.store.getListener(tenantId, id);
    if (!listener) throw new NotFound(`Listener ID ${id} not found.`);
    return listener;
  }

  list(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>> {
    return this.deps.store.listListeners(tenantId, limit, offset);
  }

  async patch(tenantId: string, id: string, body: ListenerPatch): Promise<ListenerRecord> {
    const current = await this.get(tenantId, id);
    if (!body.compute_config && body.version == null) return current;
    // k8s_namespaces is replaced as before; the §18 settings stay as they were unless given.
    const computeConfig = body.compute_config
      ? computeConfigOf({
          ...body.compute_config,
          k8s_license_secret:
            body.compute_config.k8s_license_secret === undefined ? current.compute_config.k8s_license_secret : body.compute_config.k8s_license_secret,
          k8s_allow_privileged:
            body.compute_config.k8s_allow_privileged === undefined ? current.compute_config.k8s_allow_privileged : body.compute_config.k8s_allow_privileged,
        })
      : current.compute_config;
    const updated = await this.deps.store.updateListener(tenantId, id, computeConfig, this.deps.clock.now(), body.version ?? current.version);
    if (!updated) throw new NotFound(`Listener ID ${id} not found.`);
    return updated;
  }

  async delete(tenantId: string, id: string): Promise<void> {
    const outcome = await this.deps.store.deleteListener(tenantId, id);
    if (outcome === 'not_found') throw new NotFound(`Listener ID ${id} not found.`);
    if (outcome === 'in_use') throw new Conflict(`Listener ${id} is used by deployments; delete them first.`);
  }
}

/** The stored form: the namespaces always; the k8s settings of §18 only when given (older rows read as before). */
function computeConfigOf(given: ListenerCreate['compute_config']): Listener['compute_config'] {
  return {
    k8s_namespaces: given?.k8s_namespaces ?? [],
    ...(given?.k8s_license_secret ? { k8s_license_secret: given.k8s_license_secret } : {}),
    ...(given?.k8s_allow_privileged ? { k8s_allow_privileged: true } : {}),
  };
}
