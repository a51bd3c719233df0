import { describe, expect, it } from 'vitest';
import { type ApiClient, type RevisionPoll, TransientError } from '../../shared/client.ts';
import { waitForRevision } from '../../shared/deploy/wait.ts';
import type { Revision, RevisionStatus } from '../../shared/schemas/revision.ts';

const revision = (status: RevisionStatus, version: number): Revision => ({
  id: 'r',
  deployment_id: 'd',
  created_at: '2026-11-22T10:00:00.000Z',
  updated_at: new Date(Date.UTC(2026, 10, 22, 10, 0, version)).toISOString(),
  status,
  status_message: null,
  source: 'external_docker',
  source_revision_config: {
    repo_ref: null,
    graph_config_path: null,
    image_uri: 'i',
    repo_commit_sha: null,
    langgraph_config_path: null,
    source_tarball_path: null,
  },
  trigger: 'create',
});

/** A fake clock that only moves when the code sleeps or a "held" request returns. */
function harness(answers: Array<RevisionPoll | Error | { hold: number; answer: RevisionPoll }>) {
  let clock = 0;
  const sleeps: number[] = [];
  const holds: number[] = [];
  const client = {
    getRevision: async () => ({ revision: revision('QUEUED', 0), etag: '"r.0"' }),
    pollRevision: async (_d: string, _r: string, _etag: string, wait: number) => {
      holds.push(wait);
      const next = answers.shift();
      if (!next) throw new Error('no more answers');
      if (next instanceof Error) throw next;
      if ('hold' in next) {
        clock += next.hold;
        return next.answer;
      }
      return next;
    },
  } as unknown as ApiClient;
  const options = {
    deadline: 60_000,
    pollIntervalMs: 2000,
    now: () => clock,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      clock += ms;
    },
  };
  return { client, options, sleeps, holds };
}

describe('waiting on a revision', () => {
  it('reports each status it sees and ends at a terminal one, without sleeping while the server holds', async () => {
    const h = harness([
      { hold: 1000, answer: { changed: true, etag: '"r.1"', revision: revision('DEPLOYING', 1) } },
      { hold: 30_000, answer: { changed: false, etag: '"r.1"' } },
      { hold: 500, answer: { changed: true, etag: '"r.2"', revision: revision('DEPLOYED', 2) } },
    ]);
    const seen: string[] = [];
    const result = await waitForRevision(h.client, 'd', 'r', { ...h.options, onStatus: (t) => seen.push(t.status) });
    expect(result.timedOut).toBe(false);
    expect(result.revision.status).toBe('DEPLOYED');
    expect(seen).toEqual(['QUEUED', 'DEPLOYING', 'DEPLOYED']);
    expect(h.sleeps).toEqual([]);
    expect(h.holds[0]).toBe(30);
  });

  it('falls back to poll-interval when a 304 comes back at once (nothing holds the request)', async () => {
    const h = harness([
      { changed: false, etag: '"r.0"' },
      { changed: false, etag: '"r.0"' },
      { changed: true, etag: '"r.1"', revision: revision('DEPLOYED', 1) },
    ]);
    await waitForRevision(h.client, 'd', 'r', h.options);
    expect(h.sleeps).toEqual([2000, 2000]);
  });

  it('keeps waiting through transient errors, and never holds past the deadline', async () => {
    const h = harness([
      new TransientError('down'),
      { hold: 30_000, answer: { changed: false, etag: '"r.0"' } },
      { hold: 27_000, answer: { changed: false, etag: '"r.0"' } },
    ]);
    const result = await waitForRevision(h.client, 'd', 'r', { ...h.options, deadline: 59_000 });
    expect(result).toMatchObject({ timedOut: true, revision: { status: 'QUEUED' } });
    expect(h.sleeps).toEqual([2000]);
    expect(h.holds).toEqual([30, 30, 27]);
  });
});
