import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';

export const Workspace = z.object({ id: Uuid, name: z.string(), organization_id: Uuid, created_at: Timestamp });
export type Workspace = z.infer<typeof Workspace>;

export const WorkspaceCreate = z.strictObject({ name: z.string().min(1).max(100) });
export type WorkspaceCreate = z.infer<typeof WorkspaceCreate>;
