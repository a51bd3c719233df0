import type { GithubTrust, GithubTrustCreate } from '../../../shared/schemas/github-trust.ts';
import type { Clock } from '../../lib/clock.ts';
import { auditSubject } from '../../lib/request-scope.ts';
import type { GithubTrustStore } from '../../store/github-trust.ts';
import type { Store } from '../../store/types.ts';
import { type Principal, requireOrganizationScope } from '../auth.ts';
import { NotFound } from '../errors.ts';

/**
 * A workspace's trust entries: which GitHub repositories (by numeric id) may exchange their
 * Actions ID tokens for keys of the workspace. Adding or removing one takes an organization-scoped
 * key, as making API keys does (an entry is a standing way to get keys); a workspace's own key may
 * list its workspace's entries.
 */
export class GithubTrustEntries {
  readonly #store: Pick<Store, 'getWorkspace'>;
  readonly #trust: GithubTrustStore;
  readonly #clock: Clock;

  constructor(deps: { store: Pick<Store, 'getWorkspace'>; trust: GithubTrustStore; clock: Clock }) {
    this.#store = deps.store;
    this.#trust = deps.trust;
    this.#clock = deps.clock;
  }

  async create(principal: Principal, workspaceId: string, body: GithubTrustCreate): Promise<GithubTrust> {
    requireOrganizationScope(principal, 'add GitHub trust entries');
    await this.#workspace(principal, workspaceId);
    const entry: GithubTrust = {
      id: crypto.randomUUID(),
      workspace_id: workspaceId,
      repository_id: body.repository_id,
      repository_owner_id: body.repository_owner_id,
      ref: body.ref ?? null,
      environment: body.environment ?? null,
      job_workflow_ref: body.job_workflow_ref ?? null,
      description: body.description ?? null,
      created_at: this.#clock.now(),
    };
    auditSubject(entry.id);
    await this.#trust.create(entry);
    return entry;
  }

  async list(principal: Principal, workspaceId: string): Promise<GithubTrust[]> {
    await this.#workspace(principal, workspaceId);
    return this.#trust.list(workspaceId);
  }

  async remove(principal: Principal, workspaceId: string, trustId: string): Promise<void> {
    requireOrganizationScope(principal, 'remove GitHub trust entries');
    await this.#workspace(principal, workspaceId);
    if (!(await this.#trust.remove(workspaceId, trustId))) throw new NotFound(`GitHub trust entry ID ${trustId} not found.`);
  }

  /** The workspace when the caller may see it: its organization's, and its own for a workspace key; else 404 (never say it exists). */
  async #workspace(principal: Principal, workspaceId: string): Promise<void> {
    const workspace = await this.#store.getWorkspace(workspaceId);
    const visible =
      workspace !== null && workspace.organization_id === principal.organizationId && (principal.organizationScoped || principal.workspaceId === workspaceId);
    if (!visible) throw new NotFound(`Workspace ID ${workspaceId} not found.`);
  }
}
