import type { Readable } from 'node:stream';
import { withResourceSpecDefaults } from '../../shared/schemas/resource-spec.ts';
import type { RevisionStatus } from '../../shared/schemas/revision.ts';
import type { Logger } from '../logger.ts';
import type { DeploymentRecord, RevisionWork } from '../store/types.ts';
import { inspectTarball } from './tarball.ts';
import type { DataPlane, FirstStep, FirstStepDeployment, FirstStepRevision, StageControl } from './types.ts';

export const FAIL_STAGE_SECRET = 'SANDBOX_FAIL_STAGE';

/**
 * What a revision's remaining stages need, decided when the sandbox takes it: its id and status,
 * the stage it was asked to fail, the tarball a simulated build reads, and its two first steps'
 * log lines. A revision waits a whole stage (`SANDBOX_STAGE_MS`) in memory, every one in progress
 * at once, so a waiting revision is this plan in the stage queue and nothing else: an async
 * function suspended across the wait would hold the revision (its secrets decrypted) and the
 * deployment records, its promises, closures and a timer of its own: 2,505 bytes of live heap per
 * revision held, against 589 for the plan (`node bench/held-revision-memory.ts`). The hot-path
 * benchmark holds some 60,000 creates at BUILDING, and full collections over the larger form
 * paused the server 12–16 ms.
 */
type StagePlan = {
  id: string;
  /** Where the revision is: moved on by each step the sandbox takes. */
  status: RevisionStatus;
  /** The stage it is in has lasted `stageMs`: its waiting is done. */
  stageOver: boolean;
  /** What an unexpected failure ends it as (by the stage it was handed over in). */
  failedAs: 'BUILD_FAILED' | 'DEPLOY_FAILED';
  failStage: string | null;
  upload: { deploymentId: string; objectPath: string | null; graphConfigPath: string | null } | null;
  buildStep: FirstStep | null;
  deployStep: FirstStep;
};

/**
 * SIMULATED data plane. It builds and runs nothing: each stage only waits `stageMs` and writes log
 * lines that say they are simulated. It exists so the control plane, the Action and scripts can be
 * exercised end to end without a cluster. A secret `SANDBOX_FAIL_STAGE` = `build` or `deploy`
 * fails that stage on purpose.
 */
export class SandboxDataPlane implements DataPlane {
  readonly name = 'sandbox';
  readonly #stageMs: number;
  readonly #log: Logger;
  /** Teardowns' waits (a deployment's stages wait in `#queue`). */
  readonly #timers = new Set<NodeJS.Timeout>();
  /** Revisions waiting out a stage, in the order their stages end; entries before `#queueHead` are sent. */
  #queue: Array<{ until: number; plan: StagePlan; control: StageControl } | undefined> = [];
  #queueHead = 0;
  #queueTimer: NodeJS.Timeout | undefined;
  readonly #openUpload: (deploymentId: string, objectPath: string) => Promise<Readable | null>;
  #stopped = false;

  constructor(options: { stageMs: number; log: Logger; openUpload?: (deploymentId: string, objectPath: string) => Promise<Readable | null> }) {
    this.#stageMs = options.stageMs;
    this.#log = options.log;
    this.#openUpload = options.openUpload ?? (async () => null);
  }

  run(revision: RevisionWork, deployment: DeploymentRecord, control: StageControl): void {
    this.#go(this.#plan(revision, deployment), control);
  }

  /** Everything the revision's remaining stages need, decided now (see StagePlan). */
  #plan(start: RevisionWork, deployment: DeploymentRecord): StagePlan {
    const config = start.source_revision_config;
    return {
      id: start.id,
      status: start.status,
      stageOver: false,
      failedAs: ['AWAITING_BUILD', 'BUILDING'].includes(start.status) ? 'BUILD_FAILED' : 'DEPLOY_FAILED',
      failStage: start.secrets.find((secret) => secret.name === FAIL_STAGE_SECRET)?.value ?? null,
      upload:
        deployment.source === 'internal_source'
          ? { deploymentId: deployment.id, objectPath: config.source_tarball_path, graphConfigPath: config.graph_config_path }
          : null,
      buildStep: start.status === 'AWAITING_BUILD' ? this.firstStep(start, deployment) : null,
      deployStep: this.firstStep({ ...start, status: 'AWAITING_DEPLOY' }, deployment),
    };
  }

  /** Carries the revision on to its next wait or its end; an unexpected failure ends it failed. */
  #go(plan: StagePlan, control: StageControl): void {
    this.#advance(plan, control).catch((error: unknown) => {
      if (this.#stopped) return;
      this.#log.error('sandbox: stage failed unexpectedly', { revision_id: plan.id, error: String(error) });
      void control
        .transition({
          revisionId: plan.id,
          from: ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING'],
          to: plan.failedAs,
          statusMessage: 'The sandbox data plane failed unexpectedly; see the server log.',
        })
        .catch(() => undefined);
    });
  }

  /**
   * Takes the revision's steps from where it is up to the next stage to wait out (then queues it:
   * `#waitStage`, and comes back here once the stage has lasted) or to its end.
   */
  async #advance(plan: StagePlan, control: StageControl): Promise<void> {
    if (plan.status === 'AWAITING_BUILD' && plan.buildStep) {
      if (!(await this.#step(plan, control, 'AWAITING_BUILD', plan.buildStep.to, plan.buildStep.logs))) return;
    }
    if (plan.status === 'BUILDING') {
      if (!plan.stageOver) return this.#waitStage(plan, control);
      plan.stageOver = false;
      if (plan.upload) {
        // The one real step of this simulated build: read the tarball as a builder would, to say what it would build.
        const { deploymentId, objectPath, graphConfigPath } = plan.upload;
        const found = await this.#describeUpload(deploymentId, objectPath, graphConfigPath);
        if (!found.ok) {
          await this.#step(
            plan,
            control,
            'BUILDING',
            'BUILD_FAILED',
            [{ type: 'build', level: 'error', message: `sandbox: ${found.message}` }],
            `Build failed: ${found.message}`,
          );
          return;
        }
        await control.log(plan.id, 'build', 'info', `sandbox: ${found.message}`);
      }
      if (plan.failStage === 'build') {
        await this.#step(
          plan,
          control,
          'BUILDING',
          'BUILD_FAILED',
          [{ type: 'build', level: 'error', message: 'sandbox: build failed on purpose (secret SANDBOX_FAIL_STAGE=build)' }],
          'Build failed: the sandbox was asked to fail this stage (secret SANDBOX_FAIL_STAGE=build).',
        );
        return;
      }
      if (!(await this.#step(plan, control, 'BUILDING', 'AWAITING_DEPLOY', [{ type: 'build', level: 'info', message: 'sandbox: simulated build finished' }])))
        return;
    }
    if (plan.status === 'AWAITING_DEPLOY') {
      if (!(await this.#step(plan, control, 'AWAITING_DEPLOY', plan.deployStep.to, plan.deployStep.logs))) return;
    }
    if (plan.status === 'DEPLOYING') {
      if (!plan.stageOver) return this.#waitStage(plan, control);
      plan.stageOver = false;
      if (plan.failStage === 'deploy') {
        await this.#step(
          plan,
          control,
          'DEPLOYING',
          'DEPLOY_FAILED',
          [{ type: 'deploy', level: 'error', message: 'sandbox: deploy failed on purpose (secret SANDBOX_FAIL_STAGE=deploy)' }],
          'Deploy failed: the sandbox was asked to fail this stage (secret SANDBOX_FAIL_STAGE=deploy).',
        );
        return;
      }
      await this.#step(plan, control, 'DEPLOYING', 'DEPLOYED', [
        { type: 'deploy', level: 'info', message: 'sandbox: simulated deploy finished; revision is live in the sandbox' },
      ]);
    }
  }

  /** One step, a compare-and-set: false when the revision had moved on (interrupted), and then nothing more is done. */
  async #step(
    plan: StagePlan,
    control: StageControl,
    from: RevisionStatus,
    to: RevisionStatus,
    logs: FirstStep['logs'],
    statusMessage: string | null = null,
  ): Promise<boolean> {
    const moved = await control.transition({ revisionId: plan.id, from: [from], to, statusMessage, logs });
    if (!moved) return false;
    plan.status = to;
    return true;
  }

  /**
   * Queues the revision until its stage has lasted `stageMs`. Every stage lasts as long, so the
   * queue is in the order of its deadlines and one timer, for the first, serves them all: a
   * revision waiting is its plan and one queue entry, with no promise, timer or suspended function
   * of its own.
   */
  #waitStage(plan: StagePlan, control: StageControl): void {
    if (this.#stopped) return;
    this.#queue.push({ until: performance.now() + this.#stageMs, plan, control });
    this.#arm();
  }

  #arm(): void {
    if (this.#queueTimer !== undefined || this.#stopped || this.#queueHead >= this.#queue.length) return;
    const wait = Math.max(0, Math.ceil(this.#queue[this.#queueHead]!.until - performance.now()));
    this.#queueTimer = setTimeout(() => this.#stagesOver(), wait);
  }

  /** Sends on every revision whose stage has lasted, then waits for the next one. */
  #stagesOver(): void {
    this.#queueTimer = undefined;
    const now = performance.now();
    while (this.#queueHead < this.#queue.length && this.#queue[this.#queueHead]!.until <= now) {
      const { plan, control } = this.#queue[this.#queueHead]!;
      this.#queue[this.#queueHead] = undefined;
      this.#queueHead += 1;
      plan.stageOver = true;
      this.#go(plan, control);
    }
    // Drop the sent entries' slots once they are most of the array.
    if (this.#queueHead > 1024 && this.#queueHead * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#queueHead);
      this.#queueHead = 0;
    }
    this.#arm();
  }

  /**
   * The step a revision takes as soon as this data plane has it (AWAITING_BUILD → BUILDING,
   * AWAITING_DEPLOY → DEPLOYING) with its log line. It waits for nothing, so a new deployment's
   * first revision is created already past it, in the create's own transaction; `run` then goes on
   * from there, exactly as it would after taking the step itself.
   */
  firstStep(revision: FirstStepRevision, deployment: FirstStepDeployment): FirstStep {
    const config = revision.source_revision_config;
    if (revision.status === 'AWAITING_BUILD') {
      const what =
        deployment.source === 'internal_source'
          ? `the uploaded tarball ${config.source_tarball_path} (${config.graph_config_path ?? 'langgraph.json'}); nothing is built`
          : `${deployment.source_config.repo_url}@${config.repo_ref} (${config.graph_config_path}); nothing is cloned or built`;
      return { to: 'BUILDING', logs: [{ type: 'build', level: 'info', message: `sandbox: simulated build of ${what}` }] };
    }
    const image = imageOf(revision, deployment);
    const spec = deployment.source === 'external_docker' && revision.resource_spec ? withResourceSpecDefaults(revision.resource_spec) : null;
    const scale = spec ? ` with ${spec.min_scale ?? 1}-${spec.max_scale ?? spec.min_scale ?? 1} replicas` : '';
    return { to: 'DEPLOYING', logs: [{ type: 'deploy', level: 'info', message: `sandbox: simulated deploy of ${image}${scale}; nothing is started` }] };
  }

  /** Reads the uploaded tarball and says what a real build would build from it. */
  async #describeUpload(deploymentId: string, objectPath: string | null, graphConfigPath: string | null): Promise<{ ok: boolean; message: string }> {
    const stream = objectPath ? await this.#openUpload(deploymentId, objectPath) : null;
    if (!stream) return { ok: false, message: `the uploaded tarball ${objectPath ?? '(none)'} is not in the store` };
    try {
      const summary = await inspectTarball(stream, graphConfigPath);
      const config = summary.graphConfig
        ? `graph config ${summary.graphConfig.path} found (graphs: ${summary.graphConfig.graphs.join(', ') || 'none declared'})`
        : `no graph config ${graphConfigPath ?? 'langgraph.json'} in it`;
      return { ok: true, message: `simulated build would use ${summary.files} files from ${objectPath}; ${config}` };
    } catch (error) {
      return {
        ok: false,
        message: `the uploaded tarball ${objectPath} could not be read as a gzip tarball (${error instanceof Error ? error.message : String(error)})`,
      };
    }
  }

  /** Waits one stage; false when the data plane was stopped meanwhile. */
  #wait(): Promise<boolean> {
    if (this.#stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve(!this.#stopped);
      }, this.#stageMs);
      this.#timers.add(timer);
    });
  }

  async teardown(deployment: DeploymentRecord): Promise<void> {
    this.#log.info('sandbox: simulated teardown', { deployment_id: deployment.id });
    await this.#wait();
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    clearTimeout(this.#queueTimer);
    this.#queueTimer = undefined;
    this.#queue = [];
    this.#queueHead = 0;
  }
}

function imageOf(revision: Pick<RevisionWork, 'source_revision_config'>, deployment: Pick<DeploymentRecord, 'name'>): string {
  if (revision.source_revision_config.image_uri) return revision.source_revision_config.image_uri;
  return `the build of ${deployment.name}`;
}
