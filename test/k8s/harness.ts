import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { Api } from '../helpers/api.ts';
import { ROOT } from '../helpers/listening-child.ts';
import type { KubernetesApiStandIn } from './api-stand-in.ts';

export type K8sAgentProcess = { output(): string; stop(signal?: NodeJS.Signals): Promise<void> };

/**
 * Starts the real agent as an operator would (`node agent/main.ts --compute k8s …`, the token in
 * CONTROL_PLANE_AGENT_TOKEN, a kubeconfig file) and waits until it serves its listener.
 */
export async function startK8sAgent(options: {
  url: string;
  token: string;
  listenerId: string;
  kubeconfig: string;
  args?: string[];
  /** More of the agent's environment (OTEL_EXPORTER_OTLP_ENDPOINT). */
  env?: Record<string, string>;
}): Promise<K8sAgentProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      resolve(ROOT, 'agent/main.ts'),
      '--compute',
      'k8s',
      '--url',
      options.url,
      '--listener',
      options.listenerId,
      '--kubeconfig',
      options.kubeconfig,
      '--poll-interval',
      '0.1',
      ...(options.args ?? []),
    ],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', CONTROL_PLANE_AGENT_TOKEN: options.token, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  await new Promise<void>((resolveStart, reject) => {
    // 60 s as every other child of the tests; killed at the deadline, not left running (and loading
    // the machine) to the end of the run, as two were in a loaded three-worker run.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`k8s agent did not start:\n${output}`));
    }, 60_000);
    child.stdout!.on('data', () => {
      if (output.includes('agent: serving listener')) {
        clearTimeout(timer);
        resolveStart();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`k8s agent exited with ${code}:\n${output}`));
    });
  });
  return {
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** A `k8s` listener serving `namespaces`, naming a license Secret, with an agent token. */
export async function k8sListener(api: Api, namespaces: string[]) {
  const listener = await api.post('/v2/listeners', {
    compute_type: 'k8s',
    compute_id: `k8s-${crypto.randomUUID().slice(0, 8)}`,
    // The pods read the license key from this Secret (contract §18): deployments need not carry one.
    compute_config: { k8s_namespaces: namespaces, k8s_license_secret: 'langgraph-license' },
  });
  if (listener.status !== 201) throw new Error(`listener: ${listener.status} ${JSON.stringify(listener.body)}`);
  const token = await api.post(`/v2/listeners/${listener.body.id}/tokens`);
  if (token.status !== 201) throw new Error(`token: ${token.status} ${JSON.stringify(token.body)}`);
  return { listenerId: listener.body.id as string, token: token.body.token as string };
}

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

/** The Role of docs/examples/k8s-agent.yaml: the rights the agent is documented to need. */
export function documentedRole(): { namespace: string; rules: Rule[] } {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'docs/examples/k8s-agent.yaml'), 'utf8')).map(
    (d) => d.toJS() as { kind: string; metadata: { namespace: string }; rules?: Rule[] },
  );
  const role = docs.find((d) => d.kind === 'Role');
  if (!role?.rules) throw new Error('docs/examples/k8s-agent.yaml has no Role with rules');
  return { namespace: role.metadata.namespace, rules: role.rules };
}

/**
 * Gives `token` in the stand-in exactly the rights of the documented Role, in `namespaces`: the
 * end-to-end tests then fail with a 403 if the agent needs a right the docs do not grant.
 */
export function grantDocumentedRole(standIn: KubernetesApiStandIn, token: string, namespaces: string[]): void {
  for (const rule of documentedRole().rules) {
    for (const group of rule.apiGroups) {
      standIn.grant(token, { namespaces, resources: rule.resources.map((r) => (group ? `${r}.${group}` : r)), verbs: rule.verbs });
    }
  }
}
