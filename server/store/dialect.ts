import type { Db, Dialect } from './db.ts';

/** SQLite (3.35+, for RETURNING and UPDATE … FROM): one writer at a time, lists as JSON text. */
export const sqliteDialect: Dialect = {
  name: 'sqlite',
  inList: (column, param) => `${column} IN (SELECT value FROM json_each(${param}))`,
  list: (values) => JSON.stringify(values),
  likeIgnoringCase: 'LIKE',
  jsonText: (column, key) => `json_extract(${column}, '$.${key}')`,
  byteOrder: '',
  forUpdate: '',
  forUpdateSkipLocked: '',
  forKeyShare: '',
  forShare: '',
  joinInOrder: 'CROSS JOIN',
  pageFiller: 'randomblob(2 * (SELECT page_size FROM pragma_page_size()))',
  updatePicked: ({ table, key, set, where, limit, order, returning }) =>
    `UPDATE ${table} SET ${set} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${where}${order ? ` ORDER BY ${order}` : ''} LIMIT ${limit}) RETURNING ${returning}`,
  serialize: async () => {},
  isUniqueViolation: (error) => typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE',
};

/** PostgreSQL (READ COMMITTED): read-modify-write methods lock what they read. */
export const postgresDialect: Dialect = {
  name: 'postgres',
  inList: (column, param) => `${column} = ANY(CAST(${param} AS text[]))`,
  list: (values) => values.map(String),
  likeIgnoringCase: 'ILIKE',
  jsonText: (column, key) => `(${column}::jsonb ->> '${key}')`,
  byteOrder: ' COLLATE "C"',
  forUpdate: ' FOR UPDATE',
  forUpdateSkipLocked: ' FOR UPDATE SKIP LOCKED',
  forKeyShare: ' FOR KEY SHARE',
  forShare: ' FOR SHARE',
  joinInOrder: 'JOIN',
  pageFiller: "repeat('x', 8192)",
  updatePicked: ({ table, key, set, where, limit, order, skipLocked, returning }) =>
    `WITH picked AS (SELECT ${key} FROM ${table} WHERE ${where}${order ? ` ORDER BY ${order}` : ''} LIMIT ${limit} FOR UPDATE${skipLocked ? ' SKIP LOCKED' : ''})
     UPDATE ${table} SET ${set} FROM picked WHERE ${table}.${key} = picked.${key} AND ${where}
     RETURNING ${returning.split(',').map((column) => (column.trim() === '*' ? `${table}.*` : `${table}.${column.trim()}`)).join(', ')}`,
  serialize: async (tx: Db, key: string) => {
    await tx.row("SELECT pg_advisory_xact_lock(hashtextextended('control-plane:' || CAST(? AS text), 0))", [key]);
  },
  isUniqueViolation: (error) => typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505',
};

export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
