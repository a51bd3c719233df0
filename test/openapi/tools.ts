import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Runs a CLI from node_modules with the Node that runs the tests; resolves with its exit code and output. */
export function runCli(entry: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`${ROOT}node_modules/${entry}`, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...OFFLINE_ENV, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The linters must not reach the network: Redocly's usage data and its update check (a registry
 * request) are turned off; Spectral's `spectral:oas` ruleset is built in.
 */
export const OFFLINE_ENV = {
  REDOCLY_TELEMETRY: 'off',
  REDOCLY_SUPPRESS_NOTIFICATIONS: 'true',
  REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
  NO_COLOR: '1',
};

export const SPECTRAL = '@stoplight/spectral-cli/dist/index.js';
export const REDOCLY = '@redocly/cli/bin/cli.js';
export const PRISM = '@stoplight/prism-cli/dist/index.js';
export const SPECTRAL_RULESET = `${ROOT}test/openapi/spectral.yaml`;

export type PrismProxy = { url: string; output(): string; stop(): Promise<void> };

/**
 * `prism proxy --errors <document> <upstream>` on a loopback port the OS chooses: it forwards each
 * request to the real server and checks the request and the answer against the document. With
 * `--errors`, a request that breaks the document is answered 422 by Prism itself and an answer
 * that breaks it is replaced by a 500; either way it logs the violation and sets `sl-violations`.
 */
export async function startPrismProxy(document: string, upstream: string): Promise<PrismProxy> {
  const child = spawn(process.execPath, [`${ROOT}node_modules/${PRISM}`, 'proxy', '--errors', '-p', '0', '-h', '127.0.0.1', document, upstream], {
    cwd: ROOT,
    env: { ...process.env, ...OFFLINE_ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`prism did not start:\n${output}`));
    }, 30_000);
    const onData = () => {
      const match = /Prism is listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (!match) return;
      clearTimeout(timer);
      resolve(match[1]!);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`prism exited with ${code}:\n${output}`));
    });
  });
  return {
    url,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
