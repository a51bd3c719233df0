import { join } from 'node:path';
import Database from 'better-sqlite3';
import { type Child, startChild, tempDir } from './processes.ts';
import { ENCRYPTION_KEY } from './settings.ts';

/**
 * The bare node:http + better-sqlite3 server (bench/baselines/http-sqlite.mjs) on a copy of the
 * real server's database, made now (once the server has created its deployments): it reads the
 * same rows through the same statements and writes the same three rows per create. `groupCommit`:
 * its creates asked for in one turn share one transaction, as the server's SQLite store commits them.
 */
export async function startSqliteBaseline(options: {
  serverDatabasePath: string;
  tenantId: string;
  synchronous: string;
  groupCommit: boolean;
  name: string;
  /** Node's own options (a profiler's). */
  nodeArgs?: readonly string[];
}): Promise<Child> {
  const copy = join(tempDir(), options.name);
  const source = new Database(options.serverDatabasePath, { readonly: true });
  await source.backup(copy);
  source.close();
  return startChild(
    'bench/baselines/http-sqlite.mjs',
    {
      BASELINE_DB: copy,
      BASELINE_TENANT_ID: options.tenantId,
      BASELINE_SYNCHRONOUS: options.synchronous,
      BASELINE_ENCRYPTION_KEY: ENCRYPTION_KEY,
      BASELINE_GROUP_COMMIT: options.groupCommit ? '1' : '0',
    },
    options.nodeArgs,
  );
}

/** The baseline must answer what the server answers, byte for byte, or the comparison means nothing. */
export async function sameBytes(serverUrl: string, baselineUrl: string, path: string, headers: Record<string, string>): Promise<void> {
  const [ours, bare] = await Promise.all([fetch(serverUrl + path, { headers }).then((r) => r.text()), fetch(baselineUrl + path).then((r) => r.text())]);
  if (ours !== bare) throw new Error(`the SQLite baseline answers other bytes than the server for ${path}:\nserver:   ${ours}\nbaseline: ${bare}`);
}
