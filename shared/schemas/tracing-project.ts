import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

export const TracingProject = lazySchema(() =>
  z.object({
    id: Uuid,
    name: z.string(),
    tenant_id: Uuid,
    deployment_id: Uuid.nullable(),
    created_at: Timestamp,
  }),
);
export type TracingProject = z.infer<typeof TracingProject>;

export const TracingProjectListQuery = lazySchema(() =>
  z.object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    offset: z.coerce.number().int().min(0).default(0),
    name: z.string().max(255).optional(),
  }),
);
export type TracingProjectListQuery = z.infer<typeof TracingProjectListQuery>;
