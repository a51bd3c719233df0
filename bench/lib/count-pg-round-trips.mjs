// Loaded with `node --import` into a server process by bench/pg-round-trips.ts: counts what the
// process sends to PostgreSQL on node-postgres's clients (`Client.query`: one call is one round
// trip; a `StatementPipeline` is one round trip of several statements, counted by its Parse
// messages), and the HTTP responses it ends, so that requests still in flight when the load
// generator stops count on both sides. SIGUSR2 writes the counts since the last signal to
// `$PG_ROUND_TRIPS_FILE` and starts again. For a server run from source (the bundle carries its own copy of pg) that resolves the
// same pg as this file (another checkout: its node_modules linked to this one's).
import { writeFileSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';

const pg = createRequire(import.meta.url)('pg');
let roundTrips = 0;
let statements = 0;
let responses = 0;
const end = ServerResponse.prototype.end;
ServerResponse.prototype.end = function counted(...args) {
  if (!this.writableEnded) responses += 1;
  return end.apply(this, args);
};
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function counted(config, values, callback) {
  roundTrips += 1;
  if (config?.constructor?.name === 'StatementPipeline') {
    const submit = config.submit.bind(config);
    config.submit = (connection) => {
      const parse = connection.parse;
      connection.parse = (message) => {
        statements += 1;
        return parse.call(connection, message);
      };
      try {
        submit(connection);
      } finally {
        connection.parse = parse;
      }
    };
  } else {
    statements += 1;
  }
  return query.call(this, config, values, callback);
};
process.on('SIGUSR2', () => {
  writeFileSync(process.env.PG_ROUND_TRIPS_FILE, JSON.stringify({ roundTrips, statements, responses }));
  responses = 0;
  roundTrips = 0;
  statements = 0;
});
