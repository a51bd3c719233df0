import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

export const ComputeType = lazySchema(() => z.enum(['k8s', 'sandbox', 'local']));
export type ComputeType = z.infer<typeof ComputeType>;

const Namespace = lazySchema(() =>
  z
    .string()
    .max(63)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: 'A namespace must be a DNS label' }),
);

/** A Secret's name: a DNS subdomain (RFC 1123). */
const SecretName = lazySchema(() =>
  z
    .string()
    .max(253)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, { message: 'A Secret name must be a DNS subdomain' }),
);

export const ComputeConfig = lazySchema(() =>
  z.strictObject({
    k8s_namespaces: z.array(Namespace).max(1000).default([]),
    /**
     * k8s (contract §18): a Secret in each namespace holding `LANGGRAPH_CLOUD_LICENSE_KEY` or
     * `LANGSMITH_API_KEY`, which the deployments' pods read; without it every deployment must carry one.
     */
    k8s_license_secret: SecretName.nullish(),
    /** k8s (contract §18): a spec's own securityContext, host paths and privileged settings are allowed. */
    k8s_allow_privileged: z.boolean().nullish(),
  }),
);
export type ComputeConfig = z.infer<typeof ComputeConfig>;

/** The listener agent's version, as the hosted API records it (free text). */
const Version = lazySchema(() => z.string().max(255));

export const ListenerCreate = lazySchema(() =>
  z.strictObject({
    version: Version.nullish(),
    compute_type: ComputeType,
    compute_id: z.string().min(1).max(255),
    compute_config: ComputeConfig.nullish(),
  }),
);
export type ListenerCreate = z.infer<typeof ListenerCreate>;

export const ListenerPatch = lazySchema(() => z.strictObject({ version: Version.nullish(), compute_config: ComputeConfig.nullish() }));
export type ListenerPatch = z.infer<typeof ListenerPatch>;

export const Listener = lazySchema(() =>
  z.object({
    id: Uuid,
    tenant_id: Uuid,
    /** Defaults to null so this client still reads a server that predates the field. */
    version: z.string().nullable().default(null),
    compute_type: ComputeType,
    compute_id: z.string(),
    compute_config: z.object({
      k8s_namespaces: z.array(z.string()),
      k8s_license_secret: z.string().nullable().optional(),
      k8s_allow_privileged: z.boolean().optional(),
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
    /** When an agent of this listener was last heard from (heartbeat or claim); null: never. */
    last_seen_at: Timestamp.nullable().optional(),
    /** The version the agent last reported in its heartbeat. */
    agent_version: z.string().nullable().optional(),
    agent_capacity: z.int().nullable().optional(),
  }),
);
export type Listener = z.infer<typeof Listener>;
