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
 * at once; holding its records across the waits kept its secrets decrypted for as long, and ~740
 * bytes more a revision alive (2,469 against 1,728 bytes of live heap per revision held; issue 13's
 * benchmark holds 60,000 creates at BUILDING, whose full collections paused the server 12–16 ms).
 */
type StagePlan = {
  id: string;
  status: RevisionStatus;
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
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #openUpload: (deploymentId: string, objectPath: string) => Promise<Readable | null>;
  #stopped = false;

  constructor(options: { stageMs: number; log: Logger; openUpload?: (deploymentId: string, objectPath: string) => Promise<Readable | null> }) {
    this.#stageMs = options.stageMs;
    this.#log = options.log;
    this.#openUpload = options.openUpload ?? (async () => null);
  }

  run(revision: RevisionWork, deployment: DeploymentRecord, control: StageControl): void {
    const plan = this.#plan(revision, deployment);
    const failedAs = ['AWAITING_BUILD', 'BUILDING'].includes(revision.status) ? 'BUILD_FAILED' : 'DEPLOY_FAILED';
    // Only the plan and these primitives stay referenced while the stages wait (see StagePlan).
    const { id } = plan;
    this.#carry(plan, control).catch((error: unknown) => {
      if (this.#stopped) return;
      this.#log.error('sandbox: stage failed unexpectedly', { revision_id: id, error: String(error) });
      void control
        .transition({
          revisionId: id,
          from: ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING'],
          to: failedAs,
          statusMessage: 'The sandbox data plane failed unexpectedly; see the server log.',
        })
        .catch(() => undefined);
    });
  }

  /** Everything the revision's remaining stages need, decided now (see StagePlan). */
  #plan(start: RevisionWork, deployment: DeploymentRecord): StagePlan {
    const config = start.source_revision_config;
    return {
      id: start.id,
      status: start.status,
      failStage: start.secrets.find((secret) => secret.name === FAIL_STAGE_SECRET)?.value ?? null,
      upload: deployment.source === 'internal_source' ? { deploymentId: deployment.id, objectPath: config.source_tarball_path, graphConfigPath: config.graph_config_path } : null,
      buildStep: start.status === 'AWAITING_BUILD' ? this.firstStep(start, deployment) : null,
      deployStep: this.firstStep({ ...start, status: 'AWAITING_DEPLOY' }, deployment),
    };
  }

  async #carry(plan: StagePlan, control: StageControl): Promise<void> {
    const { id, failStage, upload } = plan;
    let status = plan.status;
    // Each step is a compare-and-set: a null answer means the revision moved on (interrupted), so stop.
    const step = async (from: RevisionStatus, to: RevisionStatus, logs: FirstStep['logs'], statusMessage: string | null = null) => {
      const moved = await control.transition({ revisionId: id, from: [from], to, statusMessage, logs });
      if (!moved) return false;
      status = to;
      return true;
    };

    if (status === 'AWAITING_BUILD' && plan.buildStep) {
      if (!(await step('AWAITING_BUILD', plan.buildStep.to, plan.buildStep.logs))) return;
    }
    if (status === 'BUILDING') {
      if (!(await this.#wait())) return;
      if (upload) {
        // The one real step of this simulated build: read the tarball as a builder would, to say what it would build.
        const found = await this.#describeUpload(upload.deploymentId, upload.objectPath, upload.graphConfigPath);
        if (!found.ok) {
          await step('BUILDING', 'BUILD_FAILED', [{ type: 'build', level: 'error', message: `sandbox: ${found.message}` }], `Build failed: ${found.message}`);
          return;
        }
        await control.log(id, 'build', 'info', `sandbox: ${found.message}`);
      }
      if (failStage === 'build') {
        await step('BUILDING', 'BUILD_FAILED', [{ type: 'build', level: 'error', message: 'sandbox: build failed on purpose (secret SANDBOX_FAIL_STAGE=build)' }], 'Build failed: the sandbox was asked to fail this stage (secret SANDBOX_FAIL_STAGE=build).');
        return;
      }
      if (!(await step('BUILDING', 'AWAITING_DEPLOY', [{ type: 'build', level: 'info', message: 'sandbox: simulated build finished' }]))) return;
    }
    if (status === 'AWAITING_DEPLOY') {
      if (!(await step('AWAITING_DEPLOY', plan.deployStep.to, plan.deployStep.logs))) return;
    }
    if (status === 'DEPLOYING') {
      if (!(await this.#wait())) return;
      if (failStage === 'deploy') {
        await step('DEPLOYING', 'DEPLOY_FAILED', [{ type: 'deploy', level: 'error', message: 'sandbox: deploy failed on purpose (secret SANDBOX_FAIL_STAGE=deploy)' }], 'Deploy failed: the sandbox was asked to fail this stage (secret SANDBOX_FAIL_STAGE=deploy).');
        return;
      }
      await step('DEPLOYING', 'DEPLOYED', [{ type: 'deploy', level: 'info', message: 'sandbox: simulated deploy finished; revision is live in the sandbox' }]);
    }
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
      return { ok: false, message: `the uploaded tarball ${objectPath} could not be read as a gzip tarball (${error instanceof Error ? error.message : String(error)})` };
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
  }
}

function imageOf(revision: Pick<RevisionWork, 'source_revision_config'>, deployment: Pick<DeploymentRecord, 'name'>): string {
  if (revision.source_revision_config.image_uri) return revision.source_revision_config.image_uri;
  return `the build of ${deployment.name}`;
}
