import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BUNDLE = join(ROOT, 'action/dist/index.js');

export type ActionRun = {
  code: number | null;
  stdout: string;
  stderr: string;
  outputs: Record<string, string>;
  summary: string;
};

/** The runner's `name<<delimiter` file format; a later value of a name wins, as on a runner. */
export function parseOutputFile(text: string): Record<string, string> {
  const outputs: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const match = /^([^<=]+)<<(.+)$/.exec(lines[i]!);
    if (!match) continue;
    const [, name, delimiter] = match;
    const value: string[] = [];
    while (++i < lines.length && lines[i] !== delimiter) value.push(lines[i]!);
    outputs[name!] = value.join('\n');
  }
  return outputs;
}

export type StartedAction = { child: ChildProcess; dir: string; outputs(): Record<string, string>; done: Promise<ActionRun> };

/**
 * Runs the bundled Action as a runner does: `node action/dist/index.js` (Node 24, the Node running
 * the tests), inputs as `INPUT_<NAME>` (upper-cased, spaces to `_`, hyphens kept), the
 * `GITHUB_OUTPUT` and `GITHUB_STEP_SUMMARY` files, and the `GITHUB_*` context variables.
 */
export function startAction(inputs: Record<string, string>, env: Record<string, string> = {}): StartedAction {
  const dir = mkdtempSync(join(tmpdir(), 'action-run-'));
  const outputFile = join(dir, 'output');
  const summaryFile = join(dir, 'summary');
  writeFileSync(outputFile, '');
  writeFileSync(summaryFile, '');
  const inputEnv = Object.fromEntries(Object.entries(inputs).map(([name, value]) => [`INPUT_${name.replace(/ /g, '_').toUpperCase()}`, value]));
  const child = spawn(process.execPath, [BUNDLE], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      GITHUB_ACTIONS: 'true',
      CI: 'true',
      GITHUB_OUTPUT: outputFile,
      GITHUB_STEP_SUMMARY: summaryFile,
      GITHUB_REPOSITORY: 'acme/agent',
      GITHUB_SHA: '0123456789abcdef0123456789abcdef01234567',
      GITHUB_REF: 'refs/heads/main',
      GITHUB_REF_NAME: 'main',
      GITHUB_REF_TYPE: 'branch',
      GITHUB_RUN_ID: '4242',
      GITHUB_SERVER_URL: 'https://github.com',
      GITHUB_API_URL: 'http://127.0.0.1:9', // nothing listens: GitHub is only reached when a test says so
      GITHUB_WORKFLOW: 'deploy',
      GITHUB_EVENT_NAME: 'push',
      RUNNER_TEMP: dir,
      ...inputEnv,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<ActionRun>((resolveRun) => {
    child.once('close', (code) => {
      resolveRun({ code, stdout, stderr, outputs: parseOutputFile(readFileSync(outputFile, 'utf8')), summary: readFileSync(summaryFile, 'utf8') });
    });
  });
  return { child, dir, outputs: () => parseOutputFile(readFileSync(outputFile, 'utf8')), done };
}

export function runAction(inputs: Record<string, string>, env: Record<string, string> = {}): Promise<ActionRun> {
  return startAction(inputs, env).done;
}

export type Proxy = { url: string; requests: string[]; close(): Promise<void> };

/**
 * A loopback proxy in front of the real server that answers 503 to the first `failFirst`
 * requests, then forwards everything (streaming, so held long-poll requests stay held, unless
 * `stripPrefer` drops the header that asks for the hold).
 */
export async function startFlakyProxy(target: string, failFirst: number, options: { stripPrefer?: boolean } = {}): Promise<Proxy> {
  const requests: string[] = [];
  const upstream = new URL(target);
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    if (requests.length <= failFirst) {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Service temporarily unavailable (test proxy)' }));
      return;
    }
    // Without `Prefer`, the server answers a conditional GET at once: a proxy that breaks long-polls.
    const headers = { ...req.headers };
    if (options.stripPrefer) delete headers.prefer;
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer: IncomingMessage) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => res.writeHead(502).end());
    req.pipe(forward);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Reads a JSON request body. */
export async function readBody(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : null;
}
