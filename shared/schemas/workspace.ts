import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

export const Workspace = lazySchema(() =>
  z.object({
    id: Uuid,
    name: z.string(),
    organization_id: Uuid,
    created_at: Timestamp,
    /** The listener that serves deployments naming none (`github` ones): its sandbox listener until changed. */
    default_listener_id: Uuid.nullable().optional(),
  }),
);
export type Workspace = z.infer<typeof Workspace>;

export const WorkspaceCreate = lazySchema(() => z.strictObject({ name: z.string().min(1).max(100) }));
export type WorkspaceCreate = z.infer<typeof WorkspaceCreate>;

export const WorkspacePatch = lazySchema(() => z.strictObject({ default_listener_id: Uuid.nullable().optional() }));
export type WorkspacePatch = z.infer<typeof WorkspacePatch>;
