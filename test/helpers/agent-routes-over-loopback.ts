import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll } from 'vitest';
import { inProcessApp } from './in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** What `agentRoutesOverLoopback` hands a file: filled in by its `beforeAll`. */
export type AgentRoutesScene = { t: App; url: string; listener: { listenerId: string; token: string } };

/**
 * The real control plane served over loopback HTTP (its agent routes, their body limit, a real
 * SQLite log table) with one `local` listener and a token of it, for a file's agent-client tests;
 * started before the file's tests and closed after them.
 */
export function agentRoutesOverLoopback(computeId: string): AgentRoutesScene {
  const scene = {} as AgentRoutesScene;
  let server: ServerType;
  beforeAll(async () => {
    scene.t = await inProcessApp();
    server = serve({ fetch: scene.t.app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    scene.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const created = await scene.t.api.post('/v2/listeners', { compute_type: 'local', compute_id: computeId });
    const token = await scene.t.api.post(`/v2/listeners/${created.body.id}/tokens`);
    scene.listener = { listenerId: created.body.id as string, token: token.body.token as string };
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    scene.t.close();
  });
  return scene;
}
