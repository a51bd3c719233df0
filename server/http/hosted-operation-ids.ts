/**
 * The operationIds of the hosted API's published document (`hosted-control-plane-openapi.json`,
 * version 0.1.0), by method and path with parameter names left out. An operation this server shares
 * with the hosted API gets the same name, so a client generated from either document has the same
 * method names; routes added later that match one get it without naming it themselves.
 */
export const HOSTED_OPERATION_IDS: Readonly<Record<string, string>> = {
  'get /v1/integrations/github/install': 'list_github_integrations_v1_integrations_github_install_get',
  'get /v1/integrations/github/{}/repos': 'list_github_repositories_v1_integrations_github__integration_id__repos_get',
  'get /v1/integrations/forge/github/install': 'list_forge_github_integrations_v1_integrations_forge_github_install_get',
  'get /v1/integrations/forge/github/{}/repos': 'list_forge_github_repositories_v1_integrations_forge_github__integration_id__repos_get',
  'get /v2/deployments': 'list_deployments_v2_deployments_get',
  'post /v2/deployments': 'create_deployment_v2_deployments_post',
  'delete /v2/deployments': 'delete_deployments_v2_deployments_delete',
  'get /v2/deployments/{}': 'get_deployment_v2_deployments__deployment_id__get',
  'patch /v2/deployments/{}': 'patch_deployment_v2_deployments__deployment_id__patch',
  'delete /v2/deployments/{}': 'delete_deployment_v2_deployments__deployment_id__delete',
  'get /v2/deployments/{}/revisions': 'list_revisions_v2_deployments__deployment_id__revisions_get',
  'get /v2/deployments/{}/revisions/{}': 'get_revision_v2_deployments__deployment_id__revisions__revision_id__get',
  'post /v2/deployments/{}/revisions/{}/redeploy': 'redeploy_revision_v2_deployments__deployment_id__revisions__revision_id__redeploy_post',
  'get /v2/listeners': 'list_listeners_v2_listeners_get',
  'post /v2/listeners': 'create_listener_v2_listeners_post',
  'get /v2/listeners/{}': 'get_listener_v2_listeners__listener_id__get',
  'patch /v2/listeners/{}': 'patch_listener_v2_listeners__listener_id__patch',
  'delete /v2/listeners/{}': 'delete_listener_v2_listeners__listener_id__delete',
  'get /v2/auth/providers': 'list_oauth_providers_v2_auth_providers_get',
  'post /v2/auth/providers': 'create_oauth_provider_v2_auth_providers_post',
  'get /v2/auth/setup/{}': 'oauth_setup_callback_v2_auth_setup__provider_id__get',
  'get /v2/auth/callback/{}': 'oauth_callback_get_v2_auth_callback__provider_id__get',
  'post /v2/auth/callback/{}': 'oauth_callback_v2_auth_callback__provider_id__post',
  'post /v2/auth/authenticate': 'authenticate_v2_auth_authenticate_post',
  'get /v2/auth/wait/{}': 'wait_for_auth_completion_v2_auth_wait__auth_id__get',
  'post /v2/auth/providers/mcp-discover': 'create_mcp_oauth_provider_v2_auth_providers_mcp_discover_post',
  'get /v2/auth/providers/{}': 'get_oauth_provider_v2_auth_providers__provider_id__get',
  'patch /v2/auth/providers/{}': 'update_oauth_provider_v2_auth_providers__provider_id__patch',
  'delete /v2/auth/providers/{}': 'delete_oauth_provider_v2_auth_providers__provider_id__delete',
  'get /v2/auth/tokens': 'list_oauth_tokens_for_user_v2_auth_tokens_get',
  'delete /v2/auth/tokens': 'delete_oauth_tokens_for_user_v2_auth_tokens_delete',
  'patch /v2/auth/tokens/{}/metadata': 'update_token_label_v2_auth_tokens__token_id__metadata_patch',
  'delete /v2/auth/tokens/{}': 'delete_single_oauth_token_v2_auth_tokens__token_id__delete',
  'get /v2/auth/tokens/exists': 'check_oauth_token_exists_v2_auth_tokens_exists_get',
  'get /v2/auth/tokens/workspace/slack/exists': 'check_workspace_slack_tokens_exist_v2_auth_tokens_workspace_slack_exists_get',
  'delete /v2/auth/tokens/workspace/slack': 'revoke_all_slack_tokens_for_workspace_v2_auth_tokens_workspace_slack_delete',
  'get /v2/auth/agents/{}/connections': 'list_connections_v2_auth_agents__agent_id__connections_get',
  'post /v2/auth/agents/{}/connections': 'create_connection_v2_auth_agents__agent_id__connections_post',
  'delete /v2/auth/agents/{}/connections/{}': 'remove_connection_v2_auth_agents__agent_id__connections__connection_id__delete',
};

/** The key of `HOSTED_OPERATION_IDS` for a route: `get /v2/deployments/{}` (Hono `:param` or OpenAPI `{param}`). */
export function hostedOperationKey(method: string, path: string): string {
  return `${method.toLowerCase()} ${path.replace(/:\w+|\{\w+\}/g, '{}')}`;
}

/**
 * The hosted document's tags for the route groups it shares with this server. Code generators make
 * one class per tag (`DeploymentsV2Api`), so the shared groups use the hosted names and a client
 * generated from this document has the same classes as one generated from the hosted document.
 */
export const HOSTED_TAGS: Readonly<Record<string, string>> = {
  deployments: 'Deployments (v2)',
  revisions: 'Deployments (v2)',
  listeners: 'Listeners (v2)',
  integrations: 'Integrations (v1)',
  oauth: 'Auth Service (v2)',
};
