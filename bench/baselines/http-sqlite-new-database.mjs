// The SQLite baseline (http-sqlite.mjs) on a NEW database: before it starts, it creates the file
// BASELINE_DB with the statements of BASELINE_SCHEMA (the control plane's schema, as SQLite keeps
// it in sqlite_master: the start-up benchmark copies it from a server's database), in one
// transaction. The floor for "start on a new database": Node, better-sqlite3, the same tables.

import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';

const db = new Database(process.env.BASELINE_DB);
db.pragma('journal_mode = WAL');
db.exec(`BEGIN; ${readFileSync(process.env.BASELINE_SCHEMA, 'utf8')}; COMMIT;`);
db.close();
await import('./http-sqlite.mjs');
