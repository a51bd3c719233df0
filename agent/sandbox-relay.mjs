// Runs inside a sandbox, in its network namespace, beside the agent server: makes the server's
// loopback port (the sandbox's own 127.0.0.1) reachable as a unix socket in a folder bound from the
// deployment's folder on the host, which only the agent's proxy reaches. Plain JavaScript: the
// sandbox's Node runs it with nothing of the agent's loaders. Usage: sandbox-relay.mjs <socket> <port>
import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';

const [socketPath, port] = process.argv.slice(2);
rmSync(socketPath, { force: true });
createServer((client) => {
  const server = connect(Number(port), '127.0.0.1');
  client.pipe(server).pipe(client);
  client.on('error', () => server.destroy());
  server.on('error', () => client.destroy());
}).listen(socketPath);
