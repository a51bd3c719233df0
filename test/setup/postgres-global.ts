import type { TestProject } from 'vitest/node';
import { startTestPostgres } from '../helpers/postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The administrative database of the run's PostgreSQL; each test file creates its own database on it. */
    postgresAdminUrl: string;
  }
}

/** Starts one PostgreSQL for the whole run (or takes TEST_DATABASE_URL) and stops it at the end. */
export default async function setup(project: TestProject) {
  const postgres = await startTestPostgres();
  project.provide('postgresAdminUrl', postgres.adminUrl);
  return () => postgres.stop();
}
