import type { Workspace, WorkspacePatch } from '../../../shared/schemas/workspace.ts';
import type { AgentStore } from '../../store/agents.ts';
import type { ListenerStore, WorkspaceStore } from '../../store/types.ts';
import type { Principal } from '../auth.ts';
import { BadRequest, NotFound } from '../errors.ts';

/**
 * The workspace's default listener (contract §5): it serves every deployment that names no
 * listener, `github` ones included. Null means the built-in sandbox.
 */
export class DefaultListener {
  readonly #store: Pick<ListenerStore, 'getListener'> & Pick<WorkspaceStore, 'getWorkspace'>;
  readonly #agents: AgentStore;

  constructor(deps: { store: Pick<ListenerStore, 'getListener'> & Pick<WorkspaceStore, 'getWorkspace'>; agents: AgentStore }) {
    this.#store = deps.store;
    this.#agents = deps.agents;
  }

  async patch(principal: Principal, workspaceId: string, body: WorkspacePatch): Promise<Workspace> {
    const workspace = await this.#store.getWorkspace(workspaceId);
    // A workspace-scoped key sees only its own workspace; another organization's never exists.
    const visible =
      workspace && workspace.organization_id === principal.organizationId && (principal.organizationScoped || workspace.id === principal.workspaceId);
    if (!workspace || !visible) throw new NotFound(`Workspace ID ${workspaceId} not found.`);
    if (body.default_listener_id !== undefined) {
      if (body.default_listener_id !== null && !(await this.#store.getListener(workspaceId, body.default_listener_id))) {
        throw new BadRequest(`Listener ID ${body.default_listener_id} does not exist in this workspace.`);
      }
      await this.#agents.setDefaultListener(workspaceId, body.default_listener_id);
    }
    const updated = (await this.#store.getWorkspace(workspaceId))!;
    return {
      id: updated.id,
      name: updated.name,
      organization_id: updated.organization_id,
      created_at: updated.created_at,
      default_listener_id: updated.default_listener_id ?? null,
    };
  }
}
