/**
 * SIMULATION: a Kubernetes API stand-in for tests. There is no Kubernetes API server on these
 * machines, so this loopback HTTP server answers as one does to `@kubernetes/client-node`, for the
 * kinds the k8s agent uses: discovery (`/api`, `/apis`, group versions), server-side apply
 * (`application/apply-patch+yaml`, `fieldManager`, `force`, conflicts between managers), create,
 * get, list and delete with label selectors, `/status` subresources, `generation` and
 * `resourceVersion`, `Status` error objects, and 401 / 403 for tokens without rights. Every object
 * it stores is validated against the Kubernetes schemas (`kubernetes-models`), and it refuses the
 * changes a real API server refuses to selectors and StatefulSet specs.
 *
 * What it does not do by itself: nothing runs. Its "controllers" (a Deployment's pods becoming
 * available, a pod failing to pull its image, a StatefulSet making its volume claims) act only when
 * a test calls them (`reconcile`, `startControllers`), and they are simplifications of the real ones:
 * pods belong to their Deployment directly (no ReplicaSets), a rolling update replaces all old pods
 * at once when the new ones are ready, and apply merges by whole fields rather than by the
 * structured-merge rules of the real server.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { schemaErrors } from '../../agent/k8s/schemas.ts';

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  spec?: any;
  status?: any;
  [key: string]: unknown;
};

type Resource = { group: string; version: string; name: string; kind: string; namespaced: boolean; verbs: string[]; status?: boolean };

const RESOURCES: Resource[] = [
  { group: '', version: 'v1', name: 'secrets', kind: 'Secret', namespaced: true, verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'] },
  {
    group: '',
    version: 'v1',
    name: 'services',
    kind: 'Service',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  { group: '', version: 'v1', name: 'pods', kind: 'Pod', namespaced: true, verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'], status: true },
  {
    group: '',
    version: 'v1',
    name: 'persistentvolumeclaims',
    kind: 'PersistentVolumeClaim',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: '',
    version: 'v1',
    name: 'serviceaccounts',
    kind: 'ServiceAccount',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
  },
  { group: '', version: 'v1', name: 'namespaces', kind: 'Namespace', namespaced: false, verbs: ['get', 'list'] },
  {
    group: 'apps',
    version: 'v1',
    name: 'deployments',
    kind: 'Deployment',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: 'apps',
    version: 'v1',
    name: 'statefulsets',
    kind: 'StatefulSet',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: 'autoscaling',
    version: 'v2',
    name: 'horizontalpodautoscalers',
    kind: 'HorizontalPodAutoscaler',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
    status: true,
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    name: 'roles',
    kind: 'Role',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
  },
  {
    group: 'rbac.authorization.k8s.io',
    version: 'v1',
    name: 'rolebindings',
    kind: 'RoleBinding',
    namespaced: true,
    verbs: ['create', 'delete', 'get', 'list', 'patch', 'update'],
  },
];

/** What a token may do: in which namespaces, on which resources (`deployments.apps`, `secrets`), with which verbs. */
export type Grant = { namespaces: readonly string[]; resources?: readonly string[]; verbs?: readonly string[] };

/** One request as the stand-in saw it: what tests assert on (what was sent, and how). */
export type SeenRequest = { method: string; path: string; query: Record<string, string>; contentType: string | undefined; status: number };

/** How the simulated kubelet treats an image: pulls and runs it, fails to pull it, or the container keeps crashing. */
export type ImageFate = { pull: 'ok' } | { pull: 'fail'; reason: 'ErrImagePull' | 'ImagePullBackOff'; message: string } | { pull: 'crash'; message: string };

/**
 * The stand-in. `start()` listens on 127.0.0.1; `kubeconfig(token)` writes a kubeconfig file for
 * it; `grant(token, …)` gives a token rights (no grant: 403 on everything; unknown token: 401).
 */
export class KubernetesApiStandIn {
  readonly requests: SeenRequest[] = [];
  readonly #objects = new Map<string, Obj>();
  readonly #namespaces = new Set<string>();
  readonly #grants = new Map<string, Grant[]>();
  #resourceVersion = 1000;
  #server: Server | null = null;
  #port = 0;
  #controllers: NodeJS.Timeout | null = null;
  #certificate = '';
  /** SIMULATION: whether deleting an object deletes what it owns at once (the garbage collector); off: never. */
  collectGarbage = true;
  /** SIMULATION: decides for each image whether the pretend kubelet can pull and run it. */
  imageFate: (image: string) => ImageFate = () => ({ pull: 'ok' });

  constructor(namespaces: readonly string[]) {
    for (const ns of namespaces) this.#namespaces.add(ns);
  }

  get url(): string {
    return `https://127.0.0.1:${this.#port}`;
  }

  /**
   * Listens on 127.0.0.1 over TLS, as an API server does, with a self-signed certificate made for
   * this run (openssl); the kubeconfig carries it as the cluster's certificate authority.
   */
  async start(): Promise<this> {
    const dir = mkdtempSync(join(tmpdir(), 'k8s-stand-in-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=kubernetes-api-stand-in',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    this.#certificate = readFileSync(join(dir, 'cert.pem'), 'utf8');
    this.#server = createServer({ key: readFileSync(join(dir, 'key.pem')), cert: this.#certificate }, (req, res) => {
      this.#serve(req, res).catch((error: unknown) => this.#send(req, res, 500, status(500, 'InternalError', String(error))));
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.#port = (this.#server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    this.stopControllers();
    if (this.#server) {
      this.#server.closeAllConnections();
      await new Promise<void>((resolve) => this.#server!.close(() => resolve()));
    }
  }

  grant(token: string, grant: Grant): void {
    this.#grants.set(token, [...(this.#grants.get(token) ?? []), grant]);
  }

  /** A token the stand-in knows (401 otherwise) but that may do nothing (403 everywhere). */
  knowToken(token: string): void {
    if (!this.#grants.has(token)) this.#grants.set(token, []);
  }

  /** Writes a kubeconfig for this server and token, as `kubectl config` would; answers its path. */
  kubeconfig(token: string, namespace = 'default'): string {
    const dir = mkdtempSync(join(tmpdir(), 'k8s-stand-in-'));
    const file = join(dir, 'kubeconfig');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: stand-in`,
        `  cluster: { server: "${this.url}", certificate-authority-data: "${Buffer.from(this.#certificate).toString('base64')}" }`,
        'users:',
        `- name: agent`,
        `  user: { token: "${token}" }`,
        'contexts:',
        `- name: stand-in`,
        `  context: { cluster: stand-in, user: agent, namespace: ${namespace} }`,
        'current-context: stand-in',
        '',
      ].join('\n'),
    );
    return file;
  }

  /** Stored objects of a kind in a namespace (tests read the cluster's state through this). */
  objects(kind: string, namespace: string, selector?: string): Obj[] {
    const match = selector ? parseSelector(selector) : () => true;
    return [...this.#objects.values()]
      .filter((o) => o.kind === kind && o.metadata.namespace === namespace && match(o.metadata.labels ?? {}))
      .map((o) => structuredClone(o));
  }

  get(kind: string, namespace: string, name: string): Obj | undefined {
    const found = this.#objects.get(key(kind, namespace, name));
    return found ? structuredClone(found) : undefined;
  }

  /** Every stored object of every kind (to check that a teardown left nothing). */
  all(): Obj[] {
    return [...this.#objects.values()].map((o) => structuredClone(o));
  }

  // ---- SIMULATED CONTROLLERS: they act only when a test calls them. ----

  /** Runs `reconcile` every `intervalMs` until `stopControllers()`. */
  startControllers(intervalMs = 50): void {
    this.stopControllers();
    this.#controllers = setInterval(() => this.reconcile(), intervalMs);
  }

  stopControllers(): void {
    if (this.#controllers) clearInterval(this.#controllers);
    this.#controllers = null;
  }

  /**
   * SIMULATION of the Deployment, StatefulSet and kubelet controllers, one pass: for each workload,
   * pods of its current template are made (their images' fate decides whether they run); once all
   * of them are ready the old pods go (a rolling update with `maxUnavailable: 0`: until then the old
   * ones keep serving), and the workload's status is written as the real controller writes it.
   */
  reconcile(): void {
    for (const workload of [...this.#objects.values()]) {
      if (workload.kind === 'Deployment' || workload.kind === 'StatefulSet') this.#reconcileWorkload(workload);
    }
  }

  /** SIMULATION: the Deployment controller's verdict after `progressDeadlineSeconds` without progress. */
  exceedProgressDeadline(namespace: string, name: string): void {
    const deployment = this.#objects.get(key('Deployment', namespace, name));
    if (!deployment) throw new Error(`no Deployment ${namespace}/${name}`);
    deployment.status = {
      ...deployment.status,
      conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: `ReplicaSet "${name}-x" has timed out progressing.` }],
    };
    this.#bump(deployment);
  }

  #reconcileWorkload(workload: Obj): void {
    const ns = workload.metadata.namespace!;
    const desired: number = workload.spec?.replicas ?? 1;
    const hash = createHash('sha256')
      .update(JSON.stringify(workload.spec?.template ?? {}))
      .digest('hex')
      .slice(0, 10);
    const owned = [...this.#objects.values()].filter(
      (o) =>
        o.kind === 'Pod' &&
        o.metadata.namespace === ns &&
        (o.metadata.ownerReferences as Array<{ uid: string }> | undefined)?.[0]?.uid === workload.metadata.uid,
    );
    const current = owned.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash);
    const old = owned.filter((p) => p.metadata.labels?.['pod-template-hash'] !== hash);
    for (let i = current.length; i < desired; i += 1) current.push(this.#makePod(workload, hash, i));
    for (const extra of current.splice(desired)) this.#objects.delete(key('Pod', ns, extra.metadata.name));
    const ready = current.filter((p) => p.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True'));
    if (ready.length === desired) for (const pod of old) this.#objects.delete(key('Pod', ns, pod.metadata.name));
    const remainingOld = ready.length === desired ? 0 : old.length;
    if (workload.kind === 'StatefulSet') this.#makeClaims(workload);
    const status: any = {
      ...workload.status,
      observedGeneration: workload.metadata.generation,
      replicas: current.length + remainingOld,
      updatedReplicas: current.length,
      readyReplicas: ready.length + remainingOld,
      ...(workload.kind === 'Deployment' ? { availableReplicas: ready.length + remainingOld } : { currentReplicas: current.length }),
    };
    if (workload.kind === 'Deployment' && !status.conditions?.some((c: { reason?: string }) => c.reason === 'ProgressDeadlineExceeded')) {
      status.conditions = [{ type: 'Progressing', status: 'True', reason: ready.length === desired ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated' }];
    }
    if (JSON.stringify(status) !== JSON.stringify(workload.status)) {
      workload.status = status;
      this.#bump(workload);
    }
  }

  #makePod(workload: Obj, hash: string, index: number): Obj {
    const ns = workload.metadata.namespace!;
    const template = workload.spec.template;
    const containers: Array<{ name: string; image: string }> = template.spec.containers;
    const fates = containers.map((c) => ({ name: c.name, image: c.image, fate: this.imageFate(c.image) }));
    const failing = fates.find((f) => f.fate.pull !== 'ok');
    const name = workload.kind === 'StatefulSet' ? `${workload.metadata.name}-${index}` : `${workload.metadata.name}-${hash}-${randomUUID().slice(0, 5)}`;
    const pod: Obj = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: ns,
        uid: randomUUID(),
        labels: { ...(template.metadata?.labels ?? {}), 'pod-template-hash': hash },
        ownerReferences: [{ apiVersion: workload.apiVersion, kind: workload.kind, name: workload.metadata.name, uid: workload.metadata.uid, controller: true }],
      },
      spec: structuredClone(template.spec),
      status: {
        phase: failing ? 'Pending' : 'Running',
        conditions: [{ type: 'Ready', status: failing ? 'False' : 'True' }],
        containerStatuses: fates.map((f) =>
          f.fate.pull === 'ok'
            ? { name: f.name, image: f.image, ready: true, restartCount: 0, state: { running: { startedAt: new Date().toISOString() } } }
            : f.fate.pull === 'fail'
              ? { name: f.name, image: f.image, ready: false, restartCount: 0, state: { waiting: { reason: f.fate.reason, message: f.fate.message } } }
              : { name: f.name, image: f.image, ready: false, restartCount: 5, state: { waiting: { reason: 'CrashLoopBackOff', message: f.fate.message } } },
        ),
      },
    };
    this.#store(pod, true);
    return pod;
  }

  /** SIMULATION of the StatefulSet controller's claims: one per template, named `<template>-<set>-0`, with the template's labels. */
  #makeClaims(set: Obj): void {
    const ns = set.metadata.namespace!;
    for (const template of set.spec?.volumeClaimTemplates ?? []) {
      const name = `${template.metadata.name}-${set.metadata.name}-0`;
      if (this.#objects.has(key('PersistentVolumeClaim', ns, name))) continue;
      this.#store(
        {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name, namespace: ns, labels: { ...(template.metadata.labels ?? {}) } },
          spec: structuredClone(template.spec),
          status: { phase: 'Bound' },
        },
        true,
      );
    }
  }

  // ---- THE API ----

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token || !this.#grants.has(token)) return this.#send(req, res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    const body = await readBody(req);

    if (req.method === 'GET' && url.pathname === '/api')
      return this.#send(req, res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] });
    if (req.method === 'GET' && url.pathname === '/apis') return this.#send(req, res, 200, apiGroupList());
    const discovery = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(url.pathname);
    if (req.method === 'GET' && discovery) {
      const group = discovery[2] ?? '';
      const version = discovery[1] ?? discovery[3]!;
      const resources = RESOURCES.filter((r) => r.group === group && r.version === version);
      if (resources.length === 0) return this.#send(req, res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      return this.#send(req, res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: group ? `${group}/${version}` : version,
        resources: resources.flatMap((r) => [
          { name: r.name, singularName: r.kind.toLowerCase(), namespaced: r.namespaced, kind: r.kind, verbs: r.verbs },
          ...(r.status ? [{ name: `${r.name}/status`, singularName: '', namespaced: r.namespaced, kind: r.kind, verbs: ['get', 'patch', 'update'] }] : []),
        ]),
      });
    }

    const match = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?(?:\/(status))?$/.exec(url.pathname);
    if (!match) return this.#send(req, res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const group = match[2] ?? '';
    const version = match[1] ?? match[3]!;
    const ns = decodeURIComponent(match[4]!);
    const resource = RESOURCES.find((r) => r.group === group && r.version === version && r.name === match[5]);
    const name = match[6] ? decodeURIComponent(match[6]) : undefined;
    const subresource = match[7];
    if (!resource) return this.#send(req, res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const verb = verbOf(req.method ?? 'GET', name);
    const qualified = resource.group ? `${resource.name}.${resource.group}` : resource.name;
    if (!this.#allowed(token, ns, qualified, verb)) {
      return this.#send(
        req,
        res,
        403,
        status(
          403,
          'Forbidden',
          `${qualified}${name ? ` "${name}"` : ''} is forbidden: User "system:serviceaccount:stand-in:agent" cannot ${verb} resource "${resource.name}${subresource ? `/${subresource}` : ''}" in API group "${resource.group}" in the namespace "${ns}"`,
          { kind: resource.name, name },
        ),
      );
    }
    if (!this.#namespaces.has(ns)) return this.#send(req, res, 404, status(404, 'NotFound', `namespaces "${ns}" not found`, { kind: 'namespaces', name: ns }));
    const q = Object.fromEntries(url.searchParams);

    if (req.method === 'GET' && !name) {
      const items = this.objects(resource.kind, ns, q.labelSelector);
      return this.#send(req, res, 200, {
        kind: `${resource.kind}List`,
        apiVersion: resource.group ? `${resource.group}/${resource.version}` : resource.version,
        metadata: { resourceVersion: String(this.#resourceVersion) },
        items: items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest),
      });
    }
    if (!name) {
      if (req.method !== 'POST')
        return this.#send(req, res, 405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
      const object = parseObject(body, req.headers['content-type']);
      if (!object) return this.#send(req, res, 400, status(400, 'BadRequest', 'the body is not a Kubernetes object'));
      object.metadata = { ...object.metadata, namespace: ns };
      if (this.#objects.has(key(resource.kind, ns, object.metadata.name)))
        return this.#send(
          req,
          res,
          409,
          status(409, 'AlreadyExists', `${qualified} "${object.metadata.name}" already exists`, { kind: resource.name, name: object.metadata.name }),
        );
      return this.#write(req, res, resource, qualified, null, object, q.fieldManager ?? 'unknown', 'Update', 201);
    }
    const existing = this.#objects.get(key(resource.kind, ns, name));
    const notFound = () =>
      this.#send(req, res, 404, status(404, 'NotFound', `${qualified} "${name}" not found`, { kind: resource.name, name, group: resource.group }));

    if (req.method === 'GET') return existing ? this.#send(req, res, 200, existing) : notFound();
    if (req.method === 'DELETE') {
      if (!existing) return notFound();
      this.#objects.delete(key(resource.kind, ns, name));
      // Garbage collection: what the deleted object owned goes with it.
      for (const [k, o] of this.collectGarbage ? [...this.#objects] : []) {
        if ((o.metadata.ownerReferences as Array<{ uid: string }> | undefined)?.some((r) => r.uid === existing.metadata.uid)) this.#objects.delete(k);
      }
      return this.#send(req, res, 200, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name, group: resource.group, kind: resource.name, uid: existing.metadata.uid },
      });
    }
    if (subresource === 'status') {
      if (!existing) return notFound();
      const given = parseObject(body, req.headers['content-type']);
      if (!given) return this.#send(req, res, 400, status(400, 'BadRequest', 'the body is not a Kubernetes object'));
      const next = structuredClone(existing);
      next.status = req.method === 'PUT' ? given.status : mergePatch(existing.status ?? {}, given.status ?? {});
      return this.#write(req, res, resource, qualified, existing, next, q.fieldManager ?? 'unknown', 'Update', 200, true);
    }
    if (req.method === 'PATCH') {
      const contentType = (req.headers['content-type'] ?? '').split(';')[0];
      if (contentType === 'application/apply-patch+yaml') {
        if (!q.fieldManager)
          return this.#send(
            req,
            res,
            400,
            status(400, 'BadRequest', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'),
          );
        const applied = parseObject(body, contentType);
        if (!applied) return this.#send(req, res, 400, status(400, 'BadRequest', 'error decoding YAML: the body is not a Kubernetes object'));
        if (applied.metadata.name !== name)
          return this.#send(
            req,
            res,
            400,
            status(400, 'BadRequest', `the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`),
          );
        const owners = ((existing?.metadata.managedFields as Array<{ manager: string; operation: string }> | undefined) ?? []).filter(
          (m) => m.manager !== q.fieldManager && m.operation === 'Apply',
        );
        if (existing && owners.length > 0 && q.force !== 'true') {
          return this.#send(
            req,
            res,
            409,
            status(409, 'Conflict', `Apply failed with 1 conflict: conflict with "${owners[0]!.manager}": .spec`, { kind: resource.name, name }),
          );
        }
        const next: Obj = existing
          ? {
              ...structuredClone(existing),
              ...without(applied, ['status']),
              metadata: { ...existing.metadata, labels: applied.metadata.labels, annotations: applied.metadata.annotations },
            }
          : { ...applied, metadata: { ...applied.metadata, namespace: ns } };
        if (existing && !applied.metadata.annotations) delete next.metadata.annotations;
        return this.#write(req, res, resource, qualified, existing ?? null, next, q.fieldManager, 'Apply', existing ? 200 : 201);
      }
      if (contentType === 'application/merge-patch+json') {
        if (!existing) return notFound();
        const patch = parseObject(body, contentType);
        const next = mergePatch(existing, without(patch ?? {}, ['status'])) as Obj;
        return this.#write(req, res, resource, qualified, existing, next, q.fieldManager ?? 'unknown', 'Update', 200);
      }
      return this.#send(
        req,
        res,
        415,
        status(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/apply-patch+yaml, application/merge-patch+json`,
        ),
      );
    }
    if (req.method === 'PUT') {
      if (!existing) return notFound();
      const given = parseObject(body, req.headers['content-type']);
      if (!given) return this.#send(req, res, 400, status(400, 'BadRequest', 'the body is not a Kubernetes object'));
      if (given.metadata.resourceVersion && given.metadata.resourceVersion !== existing.metadata.resourceVersion) {
        return this.#send(
          req,
          res,
          409,
          status(
            409,
            'Conflict',
            `Operation cannot be fulfilled on ${qualified} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          ),
        );
      }
      return this.#write(req, res, resource, qualified, existing, { ...given, status: existing.status }, q.fieldManager ?? 'unknown', 'Update', 200);
    }
    return this.#send(req, res, 405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
  }

  /** Validates, applies the server's defaults and immutability rules, stores and answers. */
  #write(
    req: IncomingMessage,
    res: ServerResponse,
    resource: Resource,
    _qualified: string,
    existing: Obj | null,
    next: Obj,
    manager: string,
    operation: 'Apply' | 'Update',
    code: number,
    statusOnly = false,
  ): void {
    next.apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version;
    next.kind = resource.kind;
    if (resource.kind === 'Deployment')
      next.spec = {
        replicas: 1,
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } },
        progressDeadlineSeconds: 600,
        ...next.spec,
      };
    const { managedFields: _m, uid: _u, resourceVersion: _r, generation: _g, creationTimestamp: _c, ...given } = next.metadata;
    const invalid = schemaErrors({ ...next, metadata: given });
    if (invalid)
      return this.#send(
        req,
        res,
        422,
        status(422, 'Invalid', `${resource.kind}.${resource.group || 'core'} "${next.metadata.name}" is invalid: ${invalid}`, {
          kind: resource.name,
          name: next.metadata.name,
        }),
      );
    const immutable = existing && !statusOnly ? immutableChange(resource.kind, existing, next) : null;
    if (immutable)
      return this.#send(
        req,
        res,
        422,
        status(422, 'Invalid', `${resource.kind}.${resource.group} "${next.metadata.name}" is invalid: ${immutable}`, {
          kind: resource.name,
          name: next.metadata.name,
        }),
      );
    if (existing) {
      next.metadata.uid = existing.metadata.uid;
      next.metadata.creationTimestamp = existing.metadata.creationTimestamp;
      next.metadata.generation = existing.metadata.generation;
      if (!statusOnly) next.status = existing.status;
      const specChanged = JSON.stringify(existing.spec ?? null) !== JSON.stringify(next.spec ?? null);
      if (specChanged) next.metadata.generation = ((existing.metadata.generation as number | undefined) ?? 1) + 1;
      const others = ((existing.metadata.managedFields as Array<{ manager: string; operation: string }> | undefined) ?? []).filter(
        (m) => !(m.manager === manager && m.operation === operation),
      );
      next.metadata.managedFields = [...others, { manager, operation, apiVersion: next.apiVersion, fieldsType: 'FieldsV1', time: new Date().toISOString() }];
      if (
        !statusOnly &&
        JSON.stringify(without(existing, ['status'])) ===
          JSON.stringify(
            without(
              { ...next, metadata: { ...next.metadata, managedFields: existing.metadata.managedFields, resourceVersion: existing.metadata.resourceVersion } },
              ['status'],
            ),
          )
      ) {
        // Nothing changed: a real API server answers the stored object without a new resourceVersion.
        return this.#send(req, res, 200, existing);
      }
    } else {
      next.metadata.managedFields = [{ manager, operation, apiVersion: next.apiVersion, fieldsType: 'FieldsV1', time: new Date().toISOString() }];
    }
    this.#store(next, !existing);
    return this.#send(req, res, code, next);
  }

  #store(object: Obj, created: boolean): void {
    if (created) {
      object.metadata.uid ??= randomUUID();
      object.metadata.creationTimestamp ??= new Date().toISOString();
      object.metadata.generation ??= 1;
    }
    this.#resourceVersion += 1;
    object.metadata.resourceVersion = String(this.#resourceVersion);
    this.#objects.set(key(object.kind, object.metadata.namespace!, object.metadata.name), object);
  }

  #bump(object: Obj): void {
    this.#resourceVersion += 1;
    object.metadata.resourceVersion = String(this.#resourceVersion);
  }

  #allowed(token: string, namespace: string, resource: string, verb: string): boolean {
    return (this.#grants.get(token) ?? []).some(
      (g) =>
        (g.namespaces.includes('*') || g.namespaces.includes(namespace)) &&
        (!g.resources || g.resources.includes(resource)) &&
        (!g.verbs || g.verbs.includes(verb)),
    );
  }

  #send(req: IncomingMessage, res: ServerResponse, code: number, body: unknown): void {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    this.requests.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      contentType: req.headers['content-type'],
      status: code,
    });
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }
}

/** The changes a real API server refuses with 422: a selector, and StatefulSet spec fields other than the few it allows. */
function immutableChange(kind: string, before: Obj, after: Obj): string | null {
  if ((kind === 'Deployment' || kind === 'StatefulSet') && JSON.stringify(before.spec?.selector) !== JSON.stringify(after.spec?.selector)) {
    return `spec.selector: Invalid value: field is immutable`;
  }
  if (kind === 'StatefulSet') {
    const mutable = ['replicas', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy', 'minReadySeconds', 'ordinals'];
    if (JSON.stringify(without(before.spec ?? {}, mutable)) !== JSON.stringify(without(after.spec ?? {}, mutable))) {
      return `spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden`;
    }
  }
  return null;
}

function verbOf(method: string, name: string | undefined): string {
  if (method === 'GET') return name ? 'get' : 'list';
  if (method === 'POST') return 'create';
  if (method === 'PUT') return 'update';
  if (method === 'PATCH') return 'patch';
  if (method === 'DELETE') return 'delete';
  return method.toLowerCase();
}

function apiGroupList() {
  const groups = new Map<string, string[]>();
  for (const r of RESOURCES) if (r.group) groups.set(r.group, [...new Set([...(groups.get(r.group) ?? []), r.version])]);
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: [...groups].map(([name, versions]) => ({
      name,
      versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
      preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] },
    })),
  };
}

/** A `Status` object, as the API server sends with every error. */
function status(code: number, reason: string, message: string, details?: Record<string, unknown>) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

function key(kind: string, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

/** Label selectors as the API takes them: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated (all must hold). */
export function parseSelector(selector: string): (labels: Record<string, string>) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((term) => {
      const notEqual = /^([^!=]+)!=(.*)$/.exec(term);
      if (notEqual) return (l: Record<string, string>) => l[notEqual[1] ?? ''] !== notEqual[2];
      const equal = /^([^!=]+)==?(.*)$/.exec(term);
      if (equal) return (l: Record<string, string>) => l[equal[1] ?? ''] === equal[2];
      const absent = /^!(.+)$/.exec(term);
      if (absent) return (l: Record<string, string>) => !((absent[1] ?? '') in l);
      return (l: Record<string, string>) => term in l;
    });
  return (labels) => terms.every((t) => t(labels));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/** A body as the API server reads one: JSON, or YAML for apply (JSON is YAML too). */
function parseObject(body: string, contentType: string | undefined): Obj | null {
  try {
    const value = contentType?.includes('yaml') ? parseYaml(body) : JSON.parse(body);
    return value && typeof value === 'object' && value.metadata && typeof value.metadata.name === 'string' ? (value as Obj) : null;
  } catch {
    return null;
  }
}

function without<T extends object>(value: T, fields: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([k]) => !fields.includes(k)));
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
