import type { Settings } from '../lib/settings.ts';
import type { Row } from '../lib/table.ts';

/**
 * TODO(issue 3, webhooks): a signed `push` delivery with 10,000 deployments in the database of
 * which 10 match: time to 202 (p99, target < 20 ms) and time until the 10 revisions exist (target
 * < 50 ms). To be filled in once the webhook route is merged: seed 10,000 github deployments
 * (bench/lib/seed.ts; its `customize` sets `build_on_push`, `repo_url_key`, `repo_ref` and
 * `source_config` for the 10 that match), start the server with
 * GITHUB_WEBHOOK_SECRET, sign each delivery (new X-GitHub-Delivery per request) and drive it with
 * autocannon; then poll the 10 deployments' revisions for the pushed SHA.
 */
export async function webhookPush(_settings: Settings, log: (line: string) => void): Promise<Row[]> {
  log('webhook push: not measured yet (waits for issue 3)');
  return [{ scenario: 'webhook push, 10 of 10k match', target: '202 p99 < 20 ms; revisions < 50 ms', verdict: 'TODO', note: 'waits for issue 3 (webhooks branch)' }];
}
