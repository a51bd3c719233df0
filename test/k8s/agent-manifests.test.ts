import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { PODS, RENDERED_KINDS, VOLUME_CLAIMS } from '../../agent/k8s/cluster.ts';
import { schemaErrors } from '../../agent/k8s/schemas.ts';
import { ROOT } from '../helpers/listening-child.ts';

type Doc = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
  [key: string]: any;
};

/**
 * docs/examples/k8s-agent.yaml cannot be applied here (no cluster): this checks what can drift
 * without one. Every manifest validates against the Kubernetes schemas the agent's own objects are
 * checked with; the Role grants the kinds the agent touches and nothing else, in a namespace, never
 * cluster-wide; the agent's Deployment runs it as §14 says (`--compute k8s`, the token from a Secret,
 * the service account's credentials).
 */
describe("docs/examples/k8s-agent.yaml: the agent's least-privilege RBAC and in-cluster Deployment", () => {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'docs/examples/k8s-agent.yaml'), 'utf8')).map((d) => d.toJS() as Doc);

  it('holds a ServiceAccount, a Role, a RoleBinding, the token Secret and the Deployment, each valid against the Kubernetes schemas', () => {
    expect(docs.map((d) => d.kind).sort()).toEqual(['Deployment', 'Role', 'RoleBinding', 'Secret', 'ServiceAccount']);
    for (const doc of docs) expect(schemaErrors(doc), `${doc.kind} ${doc.metadata.name}`).toBeNull();
    expect(docs.some((d) => d.kind === 'ClusterRole' || d.kind === 'ClusterRoleBinding')).toBe(false);
  });

  it('the Role grants exactly the kinds the agent renders, reads and deletes (pods read, volume claims), in its namespace, without escalate, bind or wildcards; no list on Secrets, no delete on Pods', () => {
    const role = docs.find((d) => d.kind === 'Role')!;
    expect(role.metadata.namespace).toBeTruthy();
    const granted = new Set(role.rules!.flatMap((r) => r.apiGroups.flatMap((g) => r.resources.map((res) => `${g}/${res}`))));
    const plural: Record<string, string> = {
      Secret: 'secrets',
      Service: 'services',
      StatefulSet: 'statefulsets',
      Deployment: 'deployments',
      HorizontalPodAutoscaler: 'horizontalpodautoscalers',
      PersistentVolumeClaim: 'persistentvolumeclaims',
      Pod: 'pods',
      NetworkPolicy: 'networkpolicies',
    };
    const needed = [...RENDERED_KINDS, PODS, VOLUME_CLAIMS].map(
      ({ apiVersion, kind }) => `${apiVersion.includes('/') ? apiVersion.split('/')[0] : ''}/${plural[kind]}`,
    );
    expect([...granted].sort()).toEqual([...needed].sort());
    const verbs = role.rules!.flatMap((r) => r.verbs);
    expect(verbs.filter((v) => ['*', 'escalate', 'bind', 'impersonate'].includes(v))).toEqual([]);
    expect(role.rules!.flatMap((r) => [...r.apiGroups, ...r.resources]).includes('*')).toBe(false);
    // Pods are only read (contract §18: no delete); Secrets are never listed (a list hands over every
    // Secret's data in the namespace), removed by label with deletecollection.
    expect(role.rules!.find((r) => r.resources.includes('pods'))!.verbs.sort()).toEqual(['get', 'list']);
    expect(role.rules!.find((r) => r.resources.includes('secrets'))!.verbs.sort()).toEqual(['create', 'deletecollection', 'get', 'patch']);
    expect(role.rules!.filter((r) => r.verbs.includes('deletecollection')).flatMap((r) => r.resources)).toEqual(['secrets']);
  });

  it('the RoleBinding binds that Role to that ServiceAccount; the Deployment runs the k8s agent as it', () => {
    const account = docs.find((d) => d.kind === 'ServiceAccount')!;
    const role = docs.find((d) => d.kind === 'Role')!;
    const binding = docs.find((d) => d.kind === 'RoleBinding')!;
    expect(binding.metadata.namespace).toBe(role.metadata.namespace);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: account.metadata.name, namespace: account.metadata.namespace }]);
    const pod = docs.find((d) => d.kind === 'Deployment')!.spec.template.spec;
    expect(pod.serviceAccountName).toBe(account.metadata.name);
    const container = pod.containers[0];
    expect([...container.command, ...container.args].join(' ')).toMatch(/^node agent\/main\.ts --compute k8s --url \S+ --listener \S+ --namespace \S+/);
    // Credentials: the service account (no --kubeconfig, no KUBECONFIG); the agent token from the Secret, not in the args.
    expect(container.args).not.toContain('--kubeconfig');
    expect(container.args).not.toContain('--token');
    expect(container.env).toEqual([
      {
        name: 'CONTROL_PLANE_AGENT_TOKEN',
        valueFrom: { secretKeyRef: { name: docs.find((d) => d.kind === 'Secret')!.metadata.name, key: 'CONTROL_PLANE_AGENT_TOKEN' } },
      },
    ]);
  });
});
