import type { VerifyKeyRequest, VerifyKeyResponse } from '../../../shared/schemas/agent.ts';
import type { DeploymentStore, WorkspaceStore } from '../../store/types.ts';
import type { Auth } from '../auth.ts';
import { NotFound, Unauthorized } from '../errors.ts';
import type { AgentPrincipal } from './listener-tokens.ts';

/**
 * Whether an API key may read a deployment, asked by the agent whose proxy serves it (contract §15):
 * a key of the deployment's workspace, an organization key of its organization, or a keyless-minted
 * key of the workspace (a workspace key too). The deployment must be of the agent's own workspace:
 * another listener's agent learns nothing of it (404, as for any id of another workspace).
 */
export async function verifyDeploymentKey(
  deps: { auth: Auth; store: Pick<DeploymentStore, 'getDeployment'> & Pick<WorkspaceStore, 'getWorkspace'> },
  agent: AgentPrincipal,
  body: VerifyKeyRequest,
): Promise<VerifyKeyResponse> {
  const deployment = await deps.store.getDeployment(agent.tenantId, body.deployment_id);
  if (!deployment) throw new NotFound(`Deployment ID ${body.deployment_id} not found.`);
  let principal: Awaited<ReturnType<Auth['authenticate']>>;
  try {
    principal = await deps.auth.authenticate(body.key, undefined);
  } catch (error) {
    if (error instanceof Unauthorized) return { allowed: false, reason: 'invalid' };
    throw error;
  }
  if (!principal.organizationScoped) return principal.workspaceId === agent.tenantId ? { allowed: true } : { allowed: false, reason: 'other_workspace' };
  const workspace = await deps.store.getWorkspace(agent.tenantId);
  return workspace?.organization_id === principal.organizationId ? { allowed: true } : { allowed: false, reason: 'other_workspace' };
}
