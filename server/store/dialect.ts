import type { Db, Dialect } from './db.ts';

const sqliteJsonText = (column: string, key: string) => `json_extract(${column}, '$.${key}')`;
const postgresJsonText = (column: string, key: string) => `(${column}::jsonb ->> '${key}')`;

/** SQLite (3.35+, for RETURNING and UPDATE … FROM): one writer at a time, lists as JSON text. */
export const sqliteDialect: Dialect = {
  name: 'sqlite',
  inList: (column, param) => `${column} IN (SELECT value FROM json_each(${param}))`,
  list: (values) => JSON.stringify(values),
  likeIgnoringCase: 'LIKE',
  jsonText: sqliteJsonText,
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
  schema: {
    serialKey: 'INTEGER PRIMARY KEY AUTOINCREMENT',
    rowidColumn: '',
    bigint: 'INTEGER',
    bytes: 'BLOB',
    jsonText: sqliteJsonText,
    inlineReference: (target) => ` REFERENCES ${target}`,
    laterReference: () => '',
    afterInsertTrigger: (name, table, when, statement) => `CREATE TRIGGER ${name} AFTER INSERT ON ${table} WHEN ${when}\nBEGIN\n  ${statement};\nEND;`,
    afterRowTrigger: (name, event, table, when, statement) => `CREATE TRIGGER ${name} AFTER ${event} ON ${table} WHEN ${when}\nBEGIN\n  ${statement};\nEND;`,
    nowText: "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
  },
};

/** PostgreSQL (READ COMMITTED): read-modify-write methods lock what they read. */
export const postgresDialect: Dialect = {
  name: 'postgres',
  inList: (column, param, of = 'text') => `${column} = ANY(CAST(${param} AS ${of}[]))`,
  list: (values) => [...values],
  likeIgnoringCase: 'ILIKE',
  jsonText: postgresJsonText,
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
     RETURNING ${returning
       .split(',')
       .map((column) => (column.trim() === '*' ? `${table}.*` : `${table}.${column.trim()}`))
       .join(', ')}`,
  serialize: async (tx: Db, key: string) => {
    await tx.row("SELECT pg_advisory_xact_lock(hashtextextended('control-plane:' || CAST(? AS text), 0))", [key]);
  },
  isUniqueViolation: (error) => typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505',
  schema: {
    serialKey: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY',
    rowidColumn: 'rowid BIGINT GENERATED ALWAYS AS IDENTITY,',
    bigint: 'BIGINT',
    bytes: 'BYTEA',
    jsonText: postgresJsonText,
    inlineReference: () => '',
    laterReference: (table, name, column, target) => `ALTER TABLE ${table} ADD CONSTRAINT ${name} FOREIGN KEY (${column}) REFERENCES ${target};`,
    afterInsertTrigger: (name, table, when, statement) =>
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n  ${statement};\n  RETURN NULL;\nEND;\n$$;\n` +
      `CREATE TRIGGER ${name} AFTER INSERT ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${name}();`,
    afterRowTrigger: (name, event, table, when, statement) =>
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n  IF ${when} THEN\n    ${statement};\n  END IF;\n  RETURN NULL;\nEND;\n$$;\n` +
      `CREATE TRIGGER ${name} AFTER ${event} ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}();`,
    nowText: `to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
  },
};

export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
