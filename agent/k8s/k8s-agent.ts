import { randomBytes } from 'node:crypto';
import type { WorkDeployment, WorkItem, WorkRevision } from '../../shared/schemas/agent.ts';
import type { RevisionStatus } from '../../shared/schemas/revision.ts';
import { ClaimLoop } from '../claim-loop.ts';
import { AgentClient, WorkGone } from '../client.ts';
import { LogStream } from '../log-stream.ts';
import { type AgentTracing, NO_TRACING } from '../tracing.ts';
import { applyRevision, pruneEarlier } from './apply-revision.ts';
import type { Cluster } from './cluster.ts';
import { type K8sObject, LABELS } from './labels.ts';
import { objectNames, renderRevision } from './render.ts';
import { schemaErrors } from './schemas.ts';
import { teardownDeployment } from './teardown.ts';
import { watchRollout } from './watch-rollout.ts';

export type K8sAgentOptions = {
  /** Spans of apply and rollout, when OTEL_EXPORTER_OTLP_ENDPOINT is set; none by default. */
  tracing?: AgentTracing;
  url: string;
  token: string;
  listenerId: string;
  agentId: string;
  version: string;
  capacity: number;
  cluster: Cluster;
  /** The namespaces this agent may touch (its RBAC); empty: any the listener allows. */
  namespaces: readonly string[];
  /** Where a deployment without `k8s_namespace` goes. */
  defaultNamespace: string;
  /** Leave PostgreSQL's volume claims in place at teardown. */
  keepVolumes: boolean;
  rolloutTimeoutMs: number;
  pollMs: number;
  /** PostgreSQL's and Redis's images (`--postgres-image`, `--redis-image`: a mirror); unset: the defaults. */
  images?: { postgres?: string; redis?: string };
  print: (line: string) => void;
};

/** A failure that ends the revision with DEPLOY_FAILED and this message. */
class DeployFailure extends Error {
  override readonly name = 'DeployFailure';
}

/**
 * The `k8s` listener agent (contract §14): claims its listener's work like the `local` agent, and
 * runs each `external_docker` revision on a Kubernetes cluster: renders its objects, applies them
 * server-side, watches the rollout to DEPLOYED or DEPLOY_FAILED, prunes what the live revision no
 * longer renders, and tears deployments down by their label.
 */
export class K8sAgent {
  readonly #o: K8sAgentOptions;
  readonly #client: AgentClient;
  readonly #loop: ClaimLoop;

  constructor(options: K8sAgentOptions) {
    this.#o = options;
    this.#client = new AgentClient(options);
    this.#loop = new ClaimLoop(
      { client: this.#client, agentId: options.agentId, version: options.version, capacity: options.capacity, print: options.print },
      (work, signal) => this.#handle(work, signal),
    );
  }

  async start(): Promise<void> {
    await this.#loop.start();
    this.#o.print(
      `agent: serving listener ${this.#o.listenerId} as ${this.#o.agentId} on Kubernetes (namespaces: ${this.#o.namespaces.length ? this.#o.namespaces.join(', ') : 'any'})`,
    );
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }

  async #handle(work: WorkItem, signal: AbortSignal): Promise<void> {
    if (work.kind === 'teardown') return this.#teardown(work.deployment, work.claim_id, signal);
    return this.#carry(work.deployment, work.revision, work.claim_id, signal);
  }

  /** The namespace the deployment runs in, or why this agent may not use it. */
  #namespaceOf(deployment: WorkDeployment): { namespace: string } | { refused: string } {
    const namespace = deployment.k8s_namespace ?? this.#o.defaultNamespace;
    if (this.#o.namespaces.length > 0 && !this.#o.namespaces.includes(namespace)) {
      return { refused: `namespace '${namespace}' is not one of this agent's namespaces (${this.#o.namespaces.join(', ')}); nothing was sent to the cluster` };
    }
    return { namespace };
  }

  async #carry(deployment: WorkDeployment, revision: WorkRevision, claimId: string, signal: AbortSignal): Promise<void> {
    const gone = new AbortController();
    const onAbort = () => gone.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const logs = new LogStream(this.#client, claimId, (error) => {
      if (error instanceof WorkGone) gone.abort(error);
    });
    let status: RevisionStatus = revision.status;
    const move = async (to: RevisionStatus, statusMessage?: string) => {
      await logs.flush();
      await this.#client.transition(claimId, { from: status, to, ...(statusMessage ? { status_message: statusMessage.slice(0, 4000) } : {}) });
      status = to;
    };
    const say = (message: string, level: 'info' | 'warn' | 'error' = 'info') => logs.line('deploy', message, level);
    try {
      if (revision.source.type !== 'image') {
        // A build on a k8s listener would need a registry to push to; the seed's k8s path is images.
        const message = `A k8s listener runs external_docker images only; this revision's source is ${revision.source.type}.`;
        logs.line('build', message, 'error');
        await move(status === 'AWAITING_BUILD' || status === 'BUILDING' ? 'BUILD_FAILED' : 'DEPLOY_FAILED', message);
        return;
      }
      const where = this.#namespaceOf(deployment);
      if ('refused' in where) throw new DeployFailure(`Refused: ${where.refused}.`);
      const { namespace } = where;
      if (status === 'AWAITING_DEPLOY') await move('DEPLOYING');
      if (status !== 'DEPLOYING') return;

      const live = await this.#live(deployment, namespace);
      const objects = renderRevision({
        deployment,
        revision: { id: revision.id, image: revision.source.image_uri, secrets: revision.secrets },
        namespace,
        spec: revision.resource_spec ?? null,
        ...(await this.#passwords(deployment, namespace)),
        liveReplicas: live.replicas,
        ...(this.#o.images ? { images: this.#o.images } : {}),
        licenseSecret: deployment.k8s_license_secret ?? null,
        allowPrivileged: deployment.k8s_allow_privileged ?? false,
      });
      for (const object of objects) {
        const errors = schemaErrors(object);
        if (errors) throw new DeployFailure(`The rendered ${object.kind} ${object.metadata.name} does not validate against the Kubernetes schema: ${errors}`);
      }
      const tracing = this.#o.tracing ?? NO_TRACING;
      const { resumed } = await tracing.step('apply', revision, () => applyRevision(this.#o.cluster, objects, revision.id, gone.signal));
      say(
        resumed
          ? `k8s agent ${this.#o.agentId}: the ${objects.length} objects of this revision are already applied in ${namespace}; watching the rollout`
          : `k8s agent ${this.#o.agentId}: applied ${objects.length} objects in ${namespace} (server-side apply): ${objects.map((o) => `${o.kind} ${o.metadata.name}`).join(', ')}`,
      );
      const workloads = objects.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');
      const outcome = await tracing.step(
        'rollout',
        revision,
        () =>
          watchRollout(this.#o.cluster, workloads, revision.id, {
            pollMs: this.#o.pollMs,
            deadlineMs: this.#o.rolloutTimeoutMs,
            signal: gone.signal,
            onProgress: (waitingFor) => say(`rollout: waiting for ${waitingFor}`),
          }),
        (rollout) => (rollout.state === 'failed' ? 'rollout_failed' : null),
      );
      if (outcome.state === 'failed') {
        const previous = live.revisionId && live.revisionId !== revision.id ? ` The previous revision (${live.revisionId}) keeps serving.` : '';
        throw new DeployFailure(`The rollout failed: ${outcome.reason}.${previous}`);
      }
      say('rollout finished: every Deployment updated and available, PostgreSQL ready');
      try {
        const pruned = await pruneEarlier(this.#o.cluster, namespace, deployment.id, revision.id, objects, gone.signal);
        if (pruned.length) say(`deleted what this revision no longer renders: ${pruned.join(', ')}`);
      } catch (error) {
        if (gone.signal.aborted) throw error;
        say(`did not delete what this revision no longer renders (the next revision does): ${(error as Error).message}`, 'warn');
      }
      await move('DEPLOYED');
    } catch (error) {
      if (gone.signal.aborted || error instanceof WorkGone) {
        this.#o.print(`agent: stopped work on revision ${revision.id}: ${String(gone.signal.reason ?? error)}`);
        return;
      }
      const message = error instanceof Error ? error.message : String(error);
      say(message, 'error');
      await move('DEPLOY_FAILED', message).catch((e: unknown) => this.#o.print(`agent: could not report DEPLOY_FAILED: ${String(e)}`));
    } finally {
      signal.removeEventListener('abort', onAbort);
      await logs.flush();
    }
  }

  /** The deployment's PostgreSQL and Redis passwords: the ones in the cluster, or new ones for its first revision. */
  async #passwords(deployment: WorkDeployment, namespace: string): Promise<{ postgresPassword: string; redisPassword: string }> {
    const stored = await this.#o.cluster.read('v1', 'Secret', namespace, objectNames(deployment).postgresSecret);
    const data = (stored?.data as Record<string, string> | undefined) ?? {};
    const kept = (key: string) => (data[key] ? Buffer.from(data[key], 'base64').toString('utf8') : randomBytes(24).toString('base64url'));
    return { postgresPassword: kept('POSTGRES_PASSWORD'), redisPassword: kept('REDIS_PASSWORD') };
  }

  /**
   * What runs now: the API server's and queue's replica counts (an autoscaler may have changed
   * them), and the revision the API server belongs to.
   */
  async #live(deployment: WorkDeployment, namespace: string): Promise<{ replicas: { apiServer?: number; queue?: number }; revisionId?: string }> {
    const names = objectNames(deployment);
    const apiServer = await this.#o.cluster.read('apps/v1', 'Deployment', namespace, names.apiServer);
    const queue = await this.#o.cluster.read('apps/v1', 'Deployment', namespace, names.queue);
    const replicasOf = (object: K8sObject | null) => (object?.spec as { replicas?: number } | undefined)?.replicas;
    return { replicas: { apiServer: replicasOf(apiServer), queue: replicasOf(queue) }, revisionId: apiServer?.metadata.labels?.[LABELS.revisionId] };
  }

  async #teardown(deployment: WorkDeployment, claimId: string, signal: AbortSignal): Promise<void> {
    const where = this.#namespaceOf(deployment);
    try {
      if ('refused' in where) {
        // This agent never applies outside its namespaces, so nothing of this deployment is there for it to delete.
        this.#o.print(`agent: teardown of ${deployment.name}: ${where.refused}`);
      } else {
        const deleted = await teardownDeployment(this.#o.cluster, where.namespace, deployment.id, this.#o.keepVolumes);
        this.#o.print(
          `agent: tore down ${deployment.name} in ${where.namespace}: ${deleted.length ? deleted.join(', ') : 'nothing was there'}${this.#o.keepVolumes ? ' (volume claims kept)' : ''}`,
        );
      }
      if (signal.aborted) return;
      await this.#client.done(claimId);
    } catch (error) {
      // The claim lapses and the teardown is offered again.
      this.#o.print(`agent: teardown of ${deployment.name} failed; it will be retried: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}
