import type { MiddlewareHandler } from 'hono';
import type { AppEnv, RouteContext } from '../http/env.ts';

/** Background work a feature runs while the server does: started after the pipeline resumes, stopped before it stops. */
export type Worker = { start(): Promise<void> | void; stop(): void };

/**
 * One feature of the control plane, as `server/control-plane.ts` composes it: the routes it adds
 * (each declaring its own auth), the workers it runs, and middleware that must answer before the
 * key check. What it reads and writes is in the slice of the store its factory is typed with;
 * none is given the whole `Store`.
 */
export type Feature = {
  /** For logs and the composition test. */
  readonly name: string;
  /** Registers the feature's routes on the app; called once. */
  routes(ctx: RouteContext): void;
  /** Started in order after the pipeline resumes; stopped in the same order before the pipeline stops. */
  readonly workers: readonly Worker[];
  /** Middleware that may answer before the key check (the console's redirects of browsers). */
  readonly beforeAuth?: readonly MiddlewareHandler<AppEnv>[];
};

/** A worker with nothing to start: stopping is all it does (a subscription or watch to let go of). */
export function stopOnly(stop: () => void): Worker {
  return { start() {}, stop };
}

/** The store slice a domain class is built with (its constructor's `store`): a feature's slice is the union of its classes'. */
export type StoreSliceOf<C extends abstract new (deps: never) => unknown> = ConstructorParameters<C>[0] extends { store: infer S } ? S : never;
