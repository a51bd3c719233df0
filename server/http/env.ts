import type { Hono } from 'hono';
import type { Principal } from '../domain/auth.ts';
import type { BudgetLease } from '../lib/byte-budget.ts';
import type { Services } from '../services.ts';
import type { OpenApiRegistry } from './openapi.ts';

/** Hono's typed context: what the auth middleware puts on each request. */
export type AppEnv = {
  Variables: {
    principal: Principal;
    /** This request's share of the memory for bodies read before they are authenticated (webhooks). */
    bodyBudget: BudgetLease;
  };
};

/** What every routes file receives. */
export type RouteContext = { app: Hono<AppEnv>; services: Services; docs: OpenApiRegistry };
