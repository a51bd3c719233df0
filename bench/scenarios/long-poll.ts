import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { sqliteDialect } from '../../server/store/dialect.ts';
import { hotQueries, REVISION_RECORD_COLUMNS } from '../../server/store/queries/hot-paths.ts';
import { INSERT_LOG } from '../../server/store/revision-logs.ts';
import { UNFINISHED_REVISION_STATUSES } from '../../shared/schemas/revision.ts';
import { apiClient } from '../../test/helpers/api.ts';
import { githubBody, revisionReaches, workspaceFixtures } from '../../test/helpers/fixtures.ts';
import { holdInChild } from '../lib/hold-child.ts';
import { INSPECT, inspectorUrl, liveHeap } from '../lib/live-heap.ts';
import { holdNative, nativeLoadgen, nativeLoadgenMissing } from '../lib/native.ts';
import { rssBytes, sleep, startChild, tempDir } from '../lib/processes.ts';
import { API_KEY, type ControlPlane, type Settings, startControlPlane } from '../lib/settings.ts';
import { type Row, verdict } from '../lib/table.ts';

/**
 * The long-poll's targets (issue 40): extra memory per waiter at most 1.3× a bare node:http server's
 * holding the same requests, and the last of the waiters answered at most 5 ms after the bare
 * server's last (the median of each, over the rounds).
 */
export const LONG_POLL_TARGETS = { memoryRatio: 1.3, lastAnsweredOverBareMs: 5 } as const;

/**
 * The waiting clients are spread over this many processes: in the bench process alone, reading
 * 1,000 answers at once took longer than the target whatever the server did (the bare floor).
 */
const CLIENT_PROCESSES = 2;

/**
 * Rounds of each side: a round is a few seconds (1,000 connections held twice, 1.5 s settling each),
 * and at five the median of per-round differences moved by ±10 ms from run to run, twice the row.
 */
const ROUNDS = 11;

/** CPU time the main thread of `pid` has run, in milliseconds (`/proc/<pid>/schedstat`, nanoseconds): holds on a loaded machine. */
function mainThreadCpuMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

/**
 * Samples the main-thread CPU of `pid` about every millisecond until `stop`. `between(from, to)`
 * answers what it used between two `Date.now()`-clock times (the change's stored `updated_at`, the
 * holders' last read), each read off the two samples around it in proportion: on a loaded machine a
 * sample comes tens of milliseconds late, and the first sample after the last answer then took in
 * what the server does after its answers (docs/decisions/long-poll-wake-up.md, round 3). `closed()`
 * answers what it used from the start to the last sample (the connections closed).
 */
function cpuSampler(pid: number) {
  const samples: Array<[at: number, cpuMs: number]> = [[Date.now(), mainThreadCpuMs(pid)]];
  const timer = setInterval(() => samples.push([Date.now(), mainThreadCpuMs(pid)]), 1);
  const cpuAt = (time: number) => {
    const after = samples.findIndex(([at]) => at >= time);
    if (after === -1) return samples.at(-1)![1];
    if (after === 0) return samples[0]![1];
    const [fromAt, fromCpu] = samples[after - 1]!;
    const [toAt, toCpu] = samples[after]!;
    return fromCpu + ((toCpu - fromCpu) * (time - fromAt)) / (toAt - fromAt);
  };
  return {
    stop: () => clearInterval(timer),
    between: (from: number, to: number) => cpuAt(to) - cpuAt(from),
    closed: () => samples.at(-1)![1] - samples[0]![1],
  };
}

/**
 * 1,000 clients hold a conditional GET on the same revision (`If-None-Match` + `Prefer: wait=60`).
 * Measures the server's extra live memory while they wait (V8 heap and external memory after a
 * full collection, read through the inspector both processes are started with: bench/lib/live-heap.ts)
 * against the same of a bare node:http server holding 1,000 requests the same way
 * (bench/baselines/http-fixed.mjs `GET /wait`); the RSS deltas are printed beside it but decide
 * nothing (they depend on when each heap last grew). Then interrupts the revision through the API and
 * times the first and the last waiter answered **from the change**: the interrupted revision's
 * `updated_at`, stamped just before the transaction that changes it (same machine, same clock),
 * not from sending the interrupt, whose route is not the long-poll's delay. The sandbox's stages
 * last an hour, so nothing else moves the revision meanwhile.
 *
 * The bare server does the same work from its change on (docs/decisions/long-poll-wake-up.md): on
 * a copy of the server's database, made once every round's revision is BUILDING, its release
 * stamps the time, runs the server's own transition and log statements in one transaction with the
 * same `synchronous`, reads the record back and answers every held request the server's bytes (the
 * same body, the same five headers, a request id each); it is timed the same way, from its
 * record's `updated_at`. Both are held by the same holder with the same request bytes; which of
 * the two goes first alternates by round. Beside the wall times, each server's main-thread CPU
 * time (/proc/<pid>/schedstat), which holds on a loaded machine: over the same window as the last
 * answer's, from the change's stored time to the holders' last read (sampled about every
 * millisecond, read off in proportion between samples), and from the change's request to the
 * holders' end (the 1,000 connections closed; the server's route before its change included).
 *
 * `BENCH_LONGPOLL_BEFORE=<another checkout>` (its server/dist already built, e.g. the tree before a
 * change): that checkout's server runs beside this one's, held and interrupted the same way, its
 * rounds interleaved with this tree's and the bare server's (the order rotates by round), so both
 * trees are compared to the same bare rounds on the same machine at the same time; its row is
 * printed beside this tree's, for information (the verdict is this tree's). The notes give the
 * spread of the per-round differences (least … most) and the load average at the start and the end.
 */
export async function longPoll(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  // The C generator's holder reads the answers where it builds (bench/lib/native.ts); the Node one otherwise.
  const hold = nativeLoadgen() ? holdNative : holdInChild;
  log(
    `long-poll: ${settings.waiters} waiters on one revision, held by ${nativeLoadgen() ? 'the C generator (bench/native/loadgen.c)' : `Node clients: ${nativeLoadgenMissing}`}`,
  );
  const loadAtStart = loadavg()[0]!;
  const beforeRoot = process.env.BENCH_LONGPOLL_BEFORE ? resolve(process.env.BENCH_LONGPOLL_BEFORE) : undefined;
  const server = await startControlPlane(settings, { env: INSPECT });
  const before = beforeRoot ? await startControlPlane(settings, { env: INSPECT, root: beforeRoot }) : undefined;
  let bare: Awaited<ReturnType<typeof startChild>> | undefined;
  try {
    const rounds = settings.quick ? 1 : ROUNDS;
    /**
     * Every round's revision first, each held at BUILDING (the sandbox's stages last an hour): the
     * bare server changes the same rows (this tree's) in its copy of the database.
     */
    const revisionsOf = async (plane: ControlPlane) => {
      const api = apiClient(plane.url, API_KEY);
      const fx = await workspaceFixtures(api);
      const revisions: { path: string; id: string }[] = [];
      for (let round = 0; round < rounds; round += 1) {
        const created = await api.post('/v2/deployments', githubBody(`poll-${round}-${Date.now().toString(36)}`, fx.integrationId));
        await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['BUILDING']);
        revisions.push({ path: `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`, id: created.body.latest_revision_id });
      }
      return { plane, api, revisions };
    };
    const mine = await revisionsOf(server);
    const theirs = before ? await revisionsOf(before) : undefined;
    const { api, revisions } = mine;
    await sleep(300);
    const copy = join(tempDir(), 'long-poll-bare.db');
    const source = new Database(server.databasePath, { readonly: true });
    await source.backup(copy);
    source.close();
    bare = await startChild('bench/baselines/http-fixed.mjs', {
      ...INSPECT,
      BASELINE_WAKE_DB: copy,
      BASELINE_WAKE_TRANSITION: hotQueries(sqliteDialect).transition,
      BASELINE_WAKE_FROM: String(sqliteDialect.list(UNFINISHED_REVISION_STATUSES)),
      BASELINE_WAKE_LOG: INSERT_LOG,
      BASELINE_WAKE_READ: `SELECT ${REVISION_RECORD_COLUMNS} FROM revisions WHERE id = ?`,
      BASELINE_SYNCHRONOUS: settings.synchronous,
    });
    const inspectors = new Map([
      [server.pid, inspectorUrl(server.output())],
      [bare.pid, inspectorUrl(bare.output())],
    ]);
    if (before) inspectors.set(before.pid, inspectorUrl(before.output()));
    const extraBytes: number[] = [];
    const bareBytes: number[] = [];
    const extraRss: number[] = [];
    const bareRss: number[] = [];
    /**
     * Per round, from each server's change (its record's `updated_at`) to its first and its last
     * answer read, its main thread's CPU over the same window (`cpu`), and from the change's
     * request to the holders' end, the connections closed (`cpuClosed`).
     */
    type Times = { first: number; last: number; cpu: number; cpuClosed: number };
    const ours: Times[] = [];
    const floor: Times[] = [];
    /** The tree before's server (`BENCH_LONGPOLL_BEFORE`): its times, and its extra live memory. */
    const theirsTimes: Times[] = [];
    const theirsBytes: number[] = [];
    const interruptMs: number[] = [];
    /**
     * Holds `settings.waiters` requests on `url` from CLIENT_PROCESSES processes of their own;
     * answers the extra live memory and RSS of `pid`, and the pending answers.
     */
    const holdAll = async (pid: number, url: URL, headers: Record<string, string>) => {
      const before = await liveHeap(inspectors.get(pid)!);
      const rssBefore = rssBytes(pid);
      const share = (i: number) => Math.floor(settings.waiters / CLIENT_PROCESSES) + (i < settings.waiters % CLIENT_PROCESSES ? 1 : 0);
      const holders = Array.from({ length: CLIENT_PROCESSES }, (_, i) => hold(url.toString(), headers, share(i)));
      await Promise.all(holders.map((h) => h.connected));
      await sleep(1500);
      const answers = Promise.all(holders.map((h) => h.answers)).then((all) => ({
        lastAt: Math.max(...all.map((a) => a.lastAt)),
        firstAt: Math.min(...all.map((a) => a.firstAt ?? Number.NaN)),
        statuses: all.flatMap((a) => a.statuses),
        bodies: [...new Set(all.flatMap((a) => a.bodies))],
      }));
      const rss = rssBytes(pid) - rssBefore;
      return { extra: (await liveHeap(inspectors.get(pid)!)).totalBytes - before.totalBytes, rss, answers };
    };
    /** Checks that every waiter got the one interrupted revision; answers the times from its stored change, and the body. */
    const fromChange = (results: Awaited<Awaited<ReturnType<typeof holdAll>>['answers']>, who: string) => {
      const wrong = results.statuses.filter((status) => status !== 200).length;
      if (wrong > 0 || results.bodies.length !== 1 || !results.bodies[0]!.includes('"INTERRUPTED"')) {
        throw new Error(
          `${who}: ${wrong} waiters got another status than 200, or not all the interrupted revision (bodies: ${results.bodies.slice(0, 2).join(' | ')})`,
        );
      }
      const changedAt = Date.parse((JSON.parse(results.bodies[0]!) as { updated_at: string }).updated_at);
      return { first: results.firstAt - changedAt, last: results.lastAt - changedAt, changedAt, lastAt: results.lastAt, body: results.bodies[0]! };
    };
    /**
     * The held requests' headers for the revision at `path`: the same request bytes to every server
     * (keep-alive, as the Action's fetch holds its connection; each waiter has its own socket).
     */
    const heldHeaders = async (client: typeof api, path: string) => {
      const etag = (await client.get(path)).headers.get('etag')!;
      return { 'x-api-key': API_KEY, 'if-none-match': etag, prefer: 'wait=60' };
    };
    /** Holds every waiter on one of the servers' revision of `round`, interrupts it through its API, and times the answers. */
    const runServer = async (
      side: NonNullable<typeof theirs>,
      round: number,
      times: Times[],
      bytes: number[],
      rss: number[] | undefined,
      given?: Record<string, string>,
    ) => {
      const { path } = side.revisions[round]!;
      const headers = given ?? (await heldHeaders(side.api, path));
      const held = await holdAll(side.plane.pid, new URL(side.plane.url + path), headers);
      bytes.push(held.extra);
      rss?.push(held.rss);
      const cpu = cpuSampler(side.plane.pid);
      const sent = performance.now();
      const interrupted = await side.api.post(`${path}/interrupt`);
      if (side === mine) interruptMs.push(performance.now() - sent);
      if (interrupted.status !== 200) throw new Error(`interrupt: ${interrupted.status} ${JSON.stringify(interrupted.body)}`);
      const result = fromChange(await held.answers, side === mine ? 'server' : 'the tree before');
      cpu.stop();
      times.push({ first: result.first, last: result.last, cpu: cpu.between(result.changedAt, result.lastAt), cpuClosed: cpu.closed() });
      return result.body;
    };
    for (let round = 0; round < rounds; round += 1) {
      const { path, id } = revisions[round]!;
      const headers = await heldHeaders(api, path);
      const runBare = async () => {
        const held = await holdAll(bare!.pid, new URL(`${bare!.url}/wait`), headers);
        bareBytes.push(held.extra);
        bareRss.push(held.rss);
        const cpu = cpuSampler(bare!.pid);
        const released = await fetch(`${bare!.url}/release?revision=${id}`, { method: 'POST' });
        if (released.status !== 200) throw new Error(`bare release: ${released.status}`);
        await released.text();
        const times = fromChange(await held.answers, 'bare node:http');
        cpu.stop();
        floor.push({ first: times.first, last: times.last, cpu: cpu.between(times.changedAt, times.lastAt), cpuClosed: cpu.closed() });
        return times.body;
      };
      // Which goes first rotates by round (the order's effect is the machine's, not the servers').
      const sides: Array<{ name: string; run: () => Promise<string> }> = [
        { name: 'server', run: () => runServer(mine, round, ours, extraBytes, extraRss, headers) },
        { name: 'bare', run: runBare },
      ];
      if (theirs) sides.push({ name: 'before', run: () => runServer(theirs, round, theirsTimes, theirsBytes, undefined) });
      const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
      const bodies = new Map<string, string>();
      for (const side of order) bodies.set(side.name, await side.run());
      const bareBody = bodies.get('bare')!;
      // The same revision changed the same way: the same bytes but for the two timestamps' digits (and the ids, for the tree before's).
      for (const [name, body] of bodies) {
        const shape = (text: string) => (name === 'before' ? text.replace(/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/g, 'id') : text).replace(/\d/g, '0');
        if (Buffer.byteLength(body) !== Buffer.byteLength(bareBody) || shape(body) !== shape(bareBody)) {
          throw new Error(`the bare server answered other bytes than the ${name} server:\n${name}: ${body}\nbare:   ${bareBody}`);
        }
      }
      const o = ours.at(-1)!;
      const b = floor.at(-1)!;
      const t = theirs ? theirsTimes.at(-1)! : undefined;
      log(
        `  round ${round + 1} (${order.map((side) => side.name).join(', ')}; load ${loadavg()[0]!.toFixed(1)}): +${(extraBytes.at(-1)! / 2 ** 20).toFixed(1)} MB live (bare node:http +${(bareBytes.at(-1)! / 2 ** 20).toFixed(1)} MB); ` +
          `RSS +${(extraRss.at(-1)! / 2 ** 20).toFixed(1)} MB (bare +${(bareRss.at(-1)! / 2 ** 20).toFixed(1)} MB); ` +
          `from the change: first answer ${o.first.toFixed(1)} ms (bare ${b.first.toFixed(1)}), last ${o.last.toFixed(1)} ms (bare ${b.last.toFixed(1)}${t ? `, before ${t.last.toFixed(1)}` : ''}); ` +
          `main-thread CPU from the change to the last answer ${o.cpu.toFixed(1)} ms (bare ${b.cpu.toFixed(1)}${t ? `, before ${t.cpu.toFixed(1)}` : ''}), from the request to the connections closed ${o.cpuClosed.toFixed(1)} (bare ${b.cpuClosed.toFixed(1)}${t ? `, before ${t.cpuClosed.toFixed(1)}` : ''}); the interrupt's own round trip ${interruptMs.at(-1)!.toFixed(1)} ms`,
      );
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const extraMb = median(extraBytes) / 2 ** 20;
    const bareMb = median(bareBytes) / 2 ** 20;
    const memoryRatio = median(extraBytes.map((bytes, i) => bytes / Math.max(1, bareBytes[i]!)));
    const last = median(ours.map((o) => o.last));
    const overBare = median(ours.map((o, i) => o.last - floor[i]!.last));
    const kib = (bytes: number) => (bytes / settings.waiters / 1024).toFixed(1);
    const list = (values: number[]) => values.map((ms) => ms.toFixed(1)).join(', ');
    /** The median of per-round differences from the bare server's, with their spread (least … most). */
    const againstBare = (values: number[], bare: number[]) => {
      const differences = values.map((value, i) => value - bare[i]!);
      return `${median(differences).toFixed(1)} ms (${Math.min(...differences).toFixed(1)} … ${Math.max(...differences).toFixed(1)})`;
    };
    const load = `load ${loadAtStart.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end`;
    const beforeRow: Row[] = theirs
      ? [
          {
            scenario: `long-poll: change → last of ${settings.waiters} answered, the tree before (${beforeRoot}), for information`,
            p50: median(theirsTimes.map((t) => t.last)),
            max: Math.max(...theirsTimes.map((t) => t.last)),
            ratio: `bare + ${median(theirsTimes.map((t, i) => t.last - floor[i]!.last)).toFixed(1)} ms`,
            note:
              `the same rounds' bare server, interleaved; last answer less the bare server's ${againstBare(
                theirsTimes.map((t) => t.last),
                floor.map((b) => b.last),
              )}; this tree's less the tree before's ${againstBare(
                ours.map((o) => o.last),
                theirsTimes.map((t) => t.last),
              )}; per round, last: ${list(theirsTimes.map((t) => t.last))}; ` +
              `main-thread CPU from the change to the last answer: ${list(theirsTimes.map((t) => t.cpu))} ms, less the bare server's ${againstBare(
                theirsTimes.map((t) => t.cpu),
                floor.map((b) => b.cpu),
              )}; this tree's less the tree before's ${againstBare(
                ours.map((o) => o.cpu),
                theirsTimes.map((t) => t.cpu),
              )}; extra live memory ${(median(theirsBytes) / 2 ** 20).toFixed(1)} MB; ${load}`,
          },
        ]
      : [];
    return [
      {
        scenario: `long-poll: ${settings.waiters} waiters, extra live memory`,
        ratio: `${memoryRatio.toFixed(2)}× the bare server's`,
        target: `≤ ${LONG_POLL_TARGETS.memoryRatio}× bare`,
        verdict: verdict(memoryRatio <= LONG_POLL_TARGETS.memoryRatio),
        note:
          `${extraMb.toFixed(1)} MB (${kib(median(extraBytes))} KiB per waiter: V8 heap and external memory after a full collection) against ${bareMb.toFixed(1)} MB (${kib(median(bareBytes))} KiB) for bare node:http holding as many; median of ${rounds} (ratio: median of per-round ratios); ` +
          `RSS, not judged: +${(median(extraRss) / 2 ** 20).toFixed(1)} MB against +${(median(bareRss) / 2 ** 20).toFixed(1)} MB`,
      },
      {
        scenario: `long-poll: change → last of ${settings.waiters} answered`,
        p50: last,
        max: Math.max(...ours.map((o) => o.last)),
        ratio: `bare + ${overBare.toFixed(1)} ms`,
        target: `≤ bare + ${LONG_POLL_TARGETS.lastAnsweredOverBareMs} ms`,
        verdict: verdict(overBare <= LONG_POLL_TARGETS.lastAnsweredOverBareMs),
        note:
          `p50 = median over ${rounds} rounds, max = worst round; "bare +" = median of per-round differences; both from their record's stored updated_at, the bare server doing the same change and answers (bench/baselines/http-fixed.mjs BASELINE_WAKE_DB); ` +
          `per round, last: ${list(ours.map((o) => o.last))} against bare ${list(floor.map((b) => b.last))}; first: ${list(ours.map((o) => o.first))} against ${list(floor.map((b) => b.first))}; ` +
          `main-thread CPU from the change to the last answer: ${list(ours.map((o) => o.cpu))} ms against ${list(floor.map((b) => b.cpu))}; ` +
          `per-round differences (median, least … most): last answer ${againstBare(
            ours.map((o) => o.last),
            floor.map((b) => b.last),
          )}, main-thread CPU ${againstBare(
            ours.map((o) => o.cpu),
            floor.map((b) => b.cpu),
          )}; ${load}`,
      },
      ...beforeRow,
    ];
  } finally {
    await bare?.stop();
    await before?.stop();
    await server.stop();
  }
}
