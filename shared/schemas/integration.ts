import { z } from 'zod';
import { Uuid } from './common.ts';

/** An item of `GET /v1/integrations/github/install`. */
export const GithubIntegration = z.object({
  id: Uuid,
  installation_id: z.int(),
  name: z.string(),
});
export type GithubIntegration = z.infer<typeof GithubIntegration>;

export const GithubIntegrationCreate = z.strictObject({
  installation_id: z.int().positive(),
  name: z.string().min(1).max(255),
});
export type GithubIntegrationCreate = z.infer<typeof GithubIntegrationCreate>;
