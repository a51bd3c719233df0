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
