// Loaded with `node --import` into a server process by bench/pg-round-trips.ts: counts what the
// process sends to PostgreSQL on node-postgres's clients (`Client.query`: one call is one round
// trip; a `StatementPipeline` is one round trip of several statements, counted by its Bind
// messages), the notices its listening connection receives (`notification` events), and the HTTP
// responses it ends, so that requests still in flight when the load generator stops count on both
// sides. SIGUSR2 writes the counts since the last signal to `$PG_ROUND_TRIPS_FILE` and starts
// again. For a server run from source (the bundle carries its own copy of pg) that resolves the
// same pg as this file (another checkout: its node_modules linked to this one's).
import { writeFileSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import { Session } from 'node:inspector';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const pg = createRequire(import.meta.url)('pg');
let roundTrips = 0;
let statements = 0;
let responses = 0;
let notices = 0;
const end = ServerResponse.prototype.end;
ServerResponse.prototype.end = function counted(...args) {
  if (!this.writableEnded) responses += 1;
  return end.apply(this, args);
};
const emit = pg.Client.prototype.emit;
pg.Client.prototype.emit = function counted(event, ...args) {
  if (event === 'notification') notices += 1;
  return emit.call(this, event, ...args);
};
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function counted(config, values, callback) {
  roundTrips += 1;
  if (config?.constructor?.name === 'StatementPipeline') {
    const submit = config.submit.bind(config);
    config.submit = (connection) => {
      // Bind, not Parse: a prepared statement is parsed once per connection, bound every time.
      const bind = connection.bind;
      connection.bind = (message) => {
        statements += 1;
        return bind.call(connection, message);
      };
      try {
        submit(connection);
      } finally {
        connection.bind = bind;
      }
    };
  } else {
    statements += 1;
  }
  return query.call(this, config, values, callback);
};
// `$PG_CPU_PROFILE_DIR`: each SIGUSR2 also ends the CPU profile since the last one (written there,
// numbered) and starts the next, so each measure of the bench has a profile of its own.
const profileDir = process.env.PG_CPU_PROFILE_DIR;
let profiles = 0;
const session = profileDir ? new Session() : undefined;
if (session) {
  session.connect();
  session.post('Profiler.enable', () => session.post('Profiler.start'));
}
process.on('SIGUSR2', () => {
  if (session) {
    const number = (profiles += 1);
    session.post('Profiler.stop', (error, result) => {
      if (!error) writeFileSync(join(profileDir, `${process.pid}-${number}.cpuprofile`), JSON.stringify(result.profile));
      session.post('Profiler.start');
    });
  }
  writeFileSync(process.env.PG_ROUND_TRIPS_FILE, JSON.stringify({ roundTrips, statements, responses, notices }));
  responses = 0;
  roundTrips = 0;
  statements = 0;
  notices = 0;
});
