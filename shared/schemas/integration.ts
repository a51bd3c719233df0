import { z } from 'zod';
import { Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

/** An item of `GET /v1/integrations/github/install`. */
export const GithubIntegration = lazySchema(() =>
  z.object({
    id: Uuid,
    installation_id: z.int(),
    name: z.string(),
  }),
);
export type GithubIntegration = z.infer<typeof GithubIntegration>;

export const GithubIntegrationCreate = lazySchema(() =>
  z.strictObject({
    installation_id: z.int().positive(),
    name: z.string().min(1).max(255),
  }),
);
export type GithubIntegrationCreate = z.infer<typeof GithubIntegrationCreate>;

/** An item of `GET /v1/integrations/github/{id}/repos`, as the hosted API answers it. */
export const GithubRepository = lazySchema(() =>
  z.object({
    host_integration_id: Uuid,
    id: z.int(),
    name: z.string(),
    owner: z.string(),
    url: z.string(),
    default_branch: z.string(),
  }),
);
export type GithubRepository = z.infer<typeof GithubRepository>;
