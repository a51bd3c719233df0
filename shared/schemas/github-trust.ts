import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

/**
 * GitHub's numeric ids (repository, owner): numbers because names are recycled; a deleted
 * repository's name can be registered again by anyone, its id never.
 */
const GithubId = lazySchema(() => z.number().int().positive().max(Number.MAX_SAFE_INTEGER));

/** A full git ref as the token's `ref` claim carries it: `refs/heads/main`, `refs/tags/v1`. */
const FullRef = lazySchema(() =>
  z
    .string()
    .max(255)
    .regex(/^refs\/[^\s]+$/, { message: 'ref must be a full git ref as the token carries it, e.g. refs/heads/main or refs/tags/v1.0.0' }),
);

/** `owner/repo/.github/workflows/deploy.yml@refs/heads/main`, as the token's `job_workflow_ref` claim carries it. */
const JobWorkflowRef = lazySchema(() =>
  z
    .string()
    .max(1024)
    .regex(/^[^\s/]+\/[^\s/]+\/\S+@\S+$/, {
      message: 'job_workflow_ref must be OWNER/REPO/PATH@REF, e.g. acme/agent/.github/workflows/deploy.yml@refs/heads/main',
    }),
);

/** One repository (and optionally one ref, environment, workflow) a workspace lets deploy without a key. */
export const GithubTrustCreate = lazySchema(() =>
  z.strictObject({
    repository_id: GithubId,
    repository_owner_id: GithubId,
    ref: FullRef.optional(),
    environment: z.string().min(1).max(255).optional(),
    job_workflow_ref: JobWorkflowRef.optional(),
    description: z.string().max(500).optional(),
  }),
);
export type GithubTrustCreate = z.infer<typeof GithubTrustCreate>;

export const GithubTrust = lazySchema(() =>
  z.object({
    id: Uuid,
    workspace_id: Uuid,
    repository_id: GithubId,
    repository_owner_id: GithubId,
    ref: z.string().nullable(),
    environment: z.string().nullable(),
    job_workflow_ref: z.string().nullable(),
    description: z.string().nullable(),
    created_at: Timestamp,
  }),
);
export type GithubTrust = z.infer<typeof GithubTrust>;

/** `POST /v1/auth/github-actions/token`: a GitHub Actions OIDC ID token, and optionally which workspace. */
export const GithubTokenExchange = lazySchema(() =>
  z.strictObject({
    token: z
      .string()
      .min(1)
      .max(16 * 1024),
    /** Needed only when more than one workspace trusts the token's repository. */
    workspace_id: Uuid.optional(),
  }),
);
export type GithubTokenExchange = z.infer<typeof GithubTokenExchange>;

export const GithubTokenExchanged = lazySchema(() =>
  z.object({
    api_key: z.string(),
    expires_at: Timestamp,
    workspace_id: Uuid,
    /** The minted key's id, to revoke it with `DELETE /v1/api-keys/{id}`. */
    key_id: Uuid,
  }),
);
export type GithubTokenExchanged = z.infer<typeof GithubTokenExchanged>;

/** The claims of the ID token a key was minted for, as `GET /v1/api-keys` lists them. */
export const GithubMintClaims = lazySchema(() =>
  z.object({
    trust_id: Uuid,
    repository: z.string(),
    repository_id: z.string(),
    repository_owner: z.string(),
    repository_owner_id: z.string(),
    ref: z.string().nullable(),
    environment: z.string().nullable(),
    job_workflow_ref: z.string().nullable(),
    event_name: z.string().nullable(),
    workflow: z.string().nullable(),
    actor: z.string().nullable(),
    run_id: z.string().nullable(),
    run_attempt: z.string().nullable(),
    sha: z.string().nullable(),
    sub: z.string(),
    jti: z.string(),
  }),
);
export type GithubMintClaims = z.infer<typeof GithubMintClaims>;
