import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type CollectGarbage = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * Gives back to the system what the server's start left behind: a full collection that also shrinks
 * V8's young generation, once, soon after listening (server/main.ts).
 *
 * Why: building the server allocates a lot that survives a scavenge or two (modules, schemas, routes),
 * so V8 grows the young generation to its largest (16 MB of semi-spaces against the 4 MB of a bare
 * node:http server) and keeps it at that size while the server idles: most of what an idle server held
 * beyond the bare one (docs/decisions/server-start.md). V8 shrinks it only in a collection that aims
 * at reducing memory, which nothing triggers in an idle process. Under load the young generation
 * grows back as it always does, so the hot paths pay nothing; the collection itself is one pause of
 * a few tens of ms, once.
 *
 * Node has no API for such a collection but `gc()`, which exists only with `--expose-gc`; set at run
 * time, that flag gives the function to contexts made afterwards, so one is made to take it from.
 */
export function releaseStartGarbage(): void {
  setFlagsFromString('--expose-gc');
  const collect = runInNewContext('gc') as CollectGarbage;
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** `releaseStartGarbage` after `delayMs`, without keeping the process alive for it; cancel with `clearTimeout`. */
export function releaseStartGarbageAfter(delayMs: number): NodeJS.Timeout {
  return setTimeout(releaseStartGarbage, delayMs).unref();
}
