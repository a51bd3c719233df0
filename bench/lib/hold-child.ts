import { fork } from 'node:child_process';
import { RawConnection, requestBytes } from './raw-http.ts';

/** What one holding process reports once all its requests were answered. */
export type HeldAnswers = {
  lastAt: number;
  /** When the first answer was read (the C holder, bench/native/loadgen.c, reports it; the Node one does not). */
  firstAt?: number;
  statuses: number[];
  bodies: string[];
};

type Start = { url: string; headers: Record<string, string>; count: number };

/**
 * Holds `count` GET requests on `url` from a child process of its own, so that reading a thousand
 * answers at once is spread over processes instead of being one event loop's queue (which, in the
 * bench process, took longer than the long-poll target by itself). `connected` resolves once every
 * connection is open, its request written; `answers` when every one was answered: the last one's time as
 * `performance.timeOrigin + performance.now()` (wall clock in ms, comparable across processes on
 * one machine), the statuses, and the distinct bodies.
 */
export function holdInChild(url: string, headers: Record<string, string>, count: number): { connected: Promise<void>; answers: Promise<HeldAnswers> } {
  const child = fork(import.meta.filename, ['--hold-child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
  let connected!: () => void;
  const connectedPromise = new Promise<void>((resolve) => (connected = resolve));
  const answers = new Promise<HeldAnswers>((resolve, reject) => {
    child.on('message', (message: { kind: 'connected' } | ({ kind: 'answers' } & HeldAnswers)) => {
      if (message.kind === 'connected') connected();
      else resolve(message);
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`a holding process exited with ${code} before its answers`)));
  });
  child.send({ url, headers, count } satisfies Start);
  return { connected: connectedPromise, answers };
}

if (process.argv.includes('--hold-child') && process.send) {
  process.once('message', (message) => {
    const { url, headers, count } = message as Start;
    const target = new URL(url);
    // Raw keep-alive sockets (bench/lib/raw-http.ts): node:http's client spent tens of
    // microseconds per answer here, and reading 1,000 answers at once was most of the time measured.
    const bytes = requestBytes(target.host, { method: 'GET', path: target.pathname + target.search, headers });
    const connections = Array.from({ length: count }, () => new RawConnection(target.hostname, Number(target.port)));
    let lastAt = 0;
    const statuses: number[] = [];
    const bodies = new Set<string>();
    const all = connections.map(
      (connection) =>
        new Promise<void>((resolve) =>
          connection.send(bytes, (status, body) => {
            lastAt = Math.max(lastAt, performance.timeOrigin + performance.now());
            statuses.push(status);
            bodies.add(body.toString('utf8'));
            resolve();
          }),
        ),
    );
    Promise.all(connections.map((connection) => connection.connected)).then(
      () => process.send!({ kind: 'connected' }),
      (error: unknown) => {
        process.stderr.write(`a holding connection failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
    Promise.all(all).then(() => {
      for (const connection of connections) connection.close();
      process.send!({ kind: 'answers', lastAt, statuses, bodies: [...bodies] }, () => process.exit(0));
    });
  });
}
