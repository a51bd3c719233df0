import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { GithubMintClaims } from './github-trust.ts';
import { lazySchema } from './lazy.ts';

export const ApiKey = lazySchema(() =>
  z.object({
    id: Uuid,
    workspace_id: Uuid.nullable(),
    organization_id: Uuid,
    description: z.string().nullable(),
    created_at: Timestamp,
    /** Only on keys minted from a GitHub Actions OIDC token: when the key stops working. */
    expires_at: Timestamp.optional(),
    /** Only on keys minted from a GitHub Actions OIDC token: the claims it was minted for. */
    github_actions: GithubMintClaims.optional(),
  }),
);
export type ApiKey = z.infer<typeof ApiKey>;

/** Answer to a create: the only time the key's value is shown. */
export const ApiKeyCreated = lazySchema(() => ApiKey.extend({ key: z.string() }));
export type ApiKeyCreated = z.infer<typeof ApiKeyCreated>;

export const ApiKeyCreate = lazySchema(() =>
  z.strictObject({
    workspace_id: Uuid.nullish(),
    description: z.string().max(500).nullish(),
  }),
);
export type ApiKeyCreate = z.infer<typeof ApiKeyCreate>;
