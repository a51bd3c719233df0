import type { Clock } from '../lib/clock.ts';
import type { GithubStore, OutboxEvent } from '../store/github.ts';
import type { DeploymentRecord, RevisionRecord, Store } from '../store/types.ts';
import type { StatusCalls } from './status-calls.ts';
import type { StatusPlan } from './status-plan.ts';
import type { Target } from './status-target.ts';

/** Log lines a check run's summary ends with. */
const SUMMARY_LOG_LINES = 50;
/** GitHub's limit on a check run's `output.summary`. */
const MAX_SUMMARY = 65_535;

export type CheckRunDeps = {
  calls: StatusCalls;
  github: GithubStore;
  store: Pick<Store, 'searchLogs'>;
  clock: Clock;
};

/** A revision as its check run reports it. */
export type CheckedRevision = { event: OutboxEvent; revision: RevisionRecord; deployment: DeploymentRecord; target: Target; sha: string; pageUrl: string };

/**
 * The revision's check run `deploy/<name>`: created (once) in the phase the revision is in, then
 * moved on (`in_progress`, then `completed` with its conclusion and a Markdown summary). Its
 * `external_id` is the revision id: GitHub's "Re-run" names it.
 */
export async function sendCheckRun(deps: CheckRunDeps, checked: CheckedRevision, plan: StatusPlan): Promise<void> {
  const { calls, github, clock } = deps;
  const { event, revision, deployment, target, sha, pageUrl } = checked;
  const check = plan.check!;
  const phase = check === 'queued' || check === 'in_progress' ? check : 'completed';
  const name = `deploy/${deployment.name}`;
  const fields = async () =>
    phase === 'completed'
      ? {
          status: 'completed',
          conclusion: check,
          completed_at: clock.now().replace(/\.\d+Z$/, 'Z'),
          output: { title: plan.description, summary: await summary(deps.store, checked, plan.description) },
        }
      : { status: phase };
  const record = await github.checkRun(revision.id);
  if (record) {
    // A PATCH sets the same fields when made twice: a call cut off by a crash is simply made again.
    await calls.once(event, target, {
      revisionId: revision.id,
      call: 'check_run',
      state: phase,
      request: { method: 'PATCH', path: `/repos/${target.path}/check-runs/${record.check_run_id}`, body: await fields() },
      alreadyThere: async () => false,
    });
    return;
  }
  if (await github.wasSent(revision.id, 'check_run', 'refused')) return;
  let created: { id: number } | null = null;
  // Made in the phase the revision is in now: a check run first seen late is not walked through the earlier ones.
  const body = { name, head_sha: sha, external_id: revision.id, details_url: pageUrl, ...(await fields()) };
  const made = await calls.once(event, target, {
    revisionId: revision.id,
    call: 'check_run',
    state: 'created',
    request: { method: 'POST', path: `/repos/${target.path}/check-runs`, body },
    alreadyThere: async () => {
      const listed = await calls.get<{ check_runs: Array<{ id: number; external_id: string | null }> }>(
        target,
        `/repos/${target.path}/commits/${sha}/check-runs?check_name=${encodeURIComponent(name)}&per_page=100`,
      );
      const found = listed.check_runs.find((r) => r.external_id === revision.id);
      if (found) created = { id: found.id };
      return Boolean(found);
    },
    onAnswer: (answer) => (created = answer as { id: number }),
  });
  if (!made || !created) {
    await github.markSent(revision.id, 'check_run', 'refused', clock.now());
    return;
  }
  await github.recordCheckRun({
    revision_id: revision.id,
    check_run_id: (created as { id: number }).id,
    installation_id: target.installationId,
    owner: target.repository.owner,
    repo: target.repository.name,
    created_at: clock.now(),
  });
  await github.markSent(revision.id, 'check_run', phase, clock.now());
}

/** The check run's Markdown summary: the status, the URL, the revision's page and its last 50 log lines. */
async function summary(store: Pick<Store, 'searchLogs'>, checked: CheckedRevision, description: string): Promise<string> {
  const { revision, deployment, pageUrl } = checked;
  const newest = async (type: 'build' | 'deploy') =>
    (await store.searchLogs(revision.id, { type, order: 'desc', cursor: 0, limit: SUMMARY_LOG_LINES })).logs.reverse();
  const lines = [...(await newest('build')), ...(await newest('deploy'))].slice(-SUMMARY_LOG_LINES);
  const url = deployment.source_config.custom_url;
  const fence = '````';
  const log = lines.map((l) => `${l.timestamp} ${l.level.padEnd(5)} ${l.message.replaceAll(fence, '```')}`).join('\n');
  const text = [
    `**Status:** ${description}`,
    `**URL:** ${url ? `<${url}>` : 'none yet'}`,
    `**Revision:** [${revision.id}](${pageUrl})`,
    '',
    `**Last ${SUMMARY_LOG_LINES} log lines**`,
    '',
    fence,
    log || '(no log lines)',
    fence,
  ].join('\n');
  return text.length <= MAX_SUMMARY ? text : `${text.slice(0, MAX_SUMMARY - fence.length - 2)}\n${fence}`;
}
