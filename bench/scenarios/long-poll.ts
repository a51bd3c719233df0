import { Agent, request } from 'node:http';
import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, revisionReaches, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { rssBytes, sleep } from '../lib/processes.ts';
import { API_KEY, startControlPlane, type Settings } from '../lib/settings.ts';
import { verdict, type Row } from '../lib/table.ts';

type Answer = { status: number; at: number; body: string };

/** One held conditional GET; resolves when the server answers. */
function hold(agent: Agent, url: URL, etag: string, onSent: () => void): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers: { 'x-api-key': API_KEY, 'if-none-match': etag, prefer: 'wait=60' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, at: performance.now(), body }));
    });
    req.on('error', reject);
    req.on('socket', (socket) => socket.once('connect', onSent));
    req.end();
  });
}

/**
 * 1,000 clients hold a conditional GET on the same revision (`If-None-Match` + `Prefer: wait=60`).
 * Measures the server's extra RSS while they wait (from /proc, no server change needed), then
 * interrupts the revision through the API at a known moment and times until the last waiter is
 * answered. The sandbox's stages last an hour, so nothing else moves the revision meanwhile.
 */
export async function longPoll(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  log(`long-poll: ${settings.waiters} waiters on one revision`);
  const server = await startControlPlane(settings);
  try {
    const api = apiClient(server.url, API_KEY);
    const fx = await workspaceFixtures(api);
    const rounds = settings.quick ? 1 : 3;
    const extraBytes: number[] = [];
    const lastAnswered: number[] = [];
    const interruptMs: number[] = [];
    for (let round = 0; round < rounds; round += 1) {
      const created = await api.post('/v2/deployments', githubBody(`poll-${round}-${Date.now().toString(36)}`, fx.integrationId));
      const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
      // The revision moves to BUILDING at once and then holds for the (hour-long) stage.
      await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['BUILDING']);
      await sleep(300);
      const current = await api.get(path);
      const etag = current.headers.get('etag')!;

      // Keep-alive, as the Action's fetch holds its connection; each waiter has its own socket.
      const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
      const before = rssBytes(server.pid);
      let connected = 0;
      const url = new URL(server.url + path);
      const answers = Array.from({ length: settings.waiters }, () => hold(agent, url, etag, () => (connected += 1)));
      while (connected < settings.waiters) await sleep(50);
      // Let the server read every request and register every waiter; RSS settles.
      await sleep(1500);
      const during = rssBytes(server.pid);
      extraBytes.push(during - before);

      const sent = performance.now();
      const interrupted = await api.post(`${path}/interrupt`);
      interruptMs.push(performance.now() - sent);
      if (interrupted.status !== 200) throw new Error(`interrupt: ${interrupted.status} ${JSON.stringify(interrupted.body)}`);
      const results = await Promise.all(answers);
      agent.destroy();
      const wrong = results.filter((r) => r.status !== 200 || !r.body.includes('"INTERRUPTED"'));
      if (wrong.length > 0) throw new Error(`${wrong.length} waiters got something other than the interrupted revision (first: ${wrong[0]!.status} ${wrong[0]!.body})`);
      lastAnswered.push(Math.max(...results.map((r) => r.at)) - sent);
      log(`  round ${round + 1}: +${(extraBytes.at(-1)! / 2 ** 20).toFixed(1)} MB RSS, last answer ${lastAnswered.at(-1)!.toFixed(1)} ms after the interrupt was sent (interrupt itself ${interruptMs.at(-1)!.toFixed(1)} ms)`);
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const extraMb = median(extraBytes) / 2 ** 20;
    const last = median(lastAnswered);
    return [
      {
        scenario: `long-poll: ${settings.waiters} waiters, extra RSS`,
        target: '< 50 MB',
        verdict: verdict(extraMb < 50),
        note: `${extraMb.toFixed(1)} MB (${((median(extraBytes) / settings.waiters) / 1024).toFixed(1)} KiB per waiter, socket included); median of ${rounds}`,
      },
      {
        scenario: `long-poll: change → last of ${settings.waiters} answered`,
        p50: last,
        max: Math.max(...lastAnswered),
        target: '< 100 ms',
        verdict: verdict(Math.max(...lastAnswered) < 100),
        note: `p50 = median over ${rounds} rounds, max = worst round; from sending the interrupt (its own round trip: ${median(interruptMs).toFixed(1)} ms)`,
      },
    ];
  } finally {
    await server.stop();
  }
}
