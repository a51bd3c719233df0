import { fork } from 'node:child_process';
import { Agent, request } from 'node:http';

/** What one holding process reports once all its requests were answered. */
export type HeldAnswers = { lastAt: number; statuses: number[]; bodies: string[] };

type Start = { url: string; headers: Record<string, string>; count: number };

/**
 * Holds `count` GET requests on `url` from a child process of its own, so that reading a thousand
 * answers at once is spread over processes instead of being one event loop's queue (which, in the
 * bench process, took longer than the long-poll target by itself). `connected` resolves once every
 * request is sent; `answers` when every one was answered: the last one's time as
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
    const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
    let sent = 0;
    let lastAt = 0;
    const statuses: number[] = [];
    const bodies = new Set<string>();
    const all = Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const req = request(url, { agent, headers }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => {
              lastAt = Math.max(lastAt, performance.timeOrigin + performance.now());
              statuses.push(res.statusCode ?? 0);
              bodies.add(body);
              resolve();
            });
          });
          req.on('error', () => {
            statuses.push(0);
            resolve();
          });
          req.on('socket', (socket) =>
            socket.once('connect', () => {
              sent += 1;
              if (sent === count) process.send!({ kind: 'connected' });
            }),
          );
          req.end();
        }),
    );
    Promise.all(all).then(() => {
      agent.destroy();
      process.send!({ kind: 'answers', lastAt, statuses, bodies: [...bodies] }, () => process.exit(0));
    });
  });
}
