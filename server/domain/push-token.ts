import type { PushToken } from '../../shared/schemas/deployment.ts';
import { BadRequest } from './errors.ts';

/**
 * `POST …/push-token` for `internal_docker` deployments: the configured registry's push token, so
 * `langgraph deploy` can `docker login` and push. The token is a secret: it is only ever written
 * into this one answer, never logged.
 */
export function pushToken(config: { REGISTRY_URL?: string | undefined; REGISTRY_PUSH_TOKEN?: string | undefined }): PushToken {
  const missing = [config.REGISTRY_URL ? null : 'REGISTRY_URL', config.REGISTRY_PUSH_TOKEN ? null : 'REGISTRY_PUSH_TOKEN'].filter((name) => name !== null);
  if (missing.length > 0) {
    throw new BadRequest(`This server has no container registry configured for internal_docker pushes: set ${missing.join(' and ')}.`);
  }
  return { token: config.REGISTRY_PUSH_TOKEN!, registry_url: config.REGISTRY_URL! };
}
