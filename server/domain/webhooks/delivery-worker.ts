import type { Clock } from '../../lib/clock.ts';
import { runInRequestScope } from '../../lib/request-scope.ts';
import type { Logger } from '../../logger.ts';
import type { WorkLease } from '../../store/types.ts';
import type { PendingDelivery, WebhookStore } from '../../store/webhooks.ts';
import type { Tracing } from '../../tracing.ts';
import { leaseFromNow } from '../work-lease.ts';
import type { DeliveryProcessor, ProcessOutcome } from './process-delivery.ts';

/** GitHub redelivers for up to 3 days with the same delivery id; a week of history covers it. */
export const DELIVERY_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
const SCAN_INTERVAL_MS = 60_000;
const MAX_ATTEMPTS = 5;
const BATCH = 20;

export type DeliveryWorkerDeps = {
  webhookStore: WebhookStore;
  processor: DeliveryProcessor;
  clock: Clock;
  log: Logger;
  /** `WEBHOOK_PROCESS_DELAY_MS`: how long a delivery waits before it is processed (tests, debugging). */
  delayMs: number;
  /** This server process: the owner its claims on deliveries name. */
  processId: string;
  /** `PIPELINE_LEASE_MS`: how long a claim holds; a dead process's claims are taken over after it. */
  leaseMs: number;
  /** Told of each delivery processed or failed (the metrics). */
  observer?: { webhookDelivery(event: string, outcome: string): void };
  /** A span per delivery processed, when tracing is on: the parent of the spans of what it made. */
  tracing?: Pick<Tracing, 'inSpan'>;
};

/**
 * Turns pending deliveries into their effects, oldest first, one at a time. Kicked right after a
 * delivery is stored; also scans at start (a restart picks up what was pending) and every half
 * lease (retries, claims of dead processes), pruning once a minute. Everything it needs is in the
 * database, so a crash loses nothing. With several processes on one database each delivery is
 * claimed by one of them (a lease); a claim whose process died is taken by another after the lease,
 * and its effects are idempotent (one revision per pushed commit), so a delivery processed again
 * after a crash changes nothing twice.
 */
export class DeliveryWorker {
  readonly #deps: DeliveryWorkerDeps;
  #running: Promise<void> | null = null;
  #again = false;
  #stopped = false;
  #scanTimer: NodeJS.Timeout | null = null;
  #dueTimer: NodeJS.Timeout | null = null;

  constructor(deps: DeliveryWorkerDeps) {
    this.#deps = deps;
  }

  start(): void {
    this.#stopped = false;
    this.kick();
    let lastPrune = Date.now();
    this.#scanTimer = setInterval(
      () => {
        if (Date.now() - lastPrune >= SCAN_INTERVAL_MS) {
          lastPrune = Date.now();
          this.#prune().catch((error: unknown) => this.#deps.log.error('webhooks: pruning deliveries failed', { error: String(error) }));
        }
        this.kick();
      },
      Math.min(SCAN_INTERVAL_MS, Math.max(50, Math.floor(this.#deps.leaseMs / 2))),
    );
    this.#scanTimer.unref();
  }

  /** A claim for this process from now. */
  #lease(): WorkLease {
    return leaseFromNow(this.#deps.clock, this.#deps.processId, this.#deps.leaseMs);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#scanTimer) clearInterval(this.#scanTimer);
    if (this.#dueTimer) clearTimeout(this.#dueTimer);
  }

  /** Processes what is pending now; a kick during a run makes the run go round once more. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    // Start on the next turn of the event loop: the 202 of the request that stored the delivery
    // goes out first, instead of waiting behind the work it announced.
    this.#running = yieldToIo()
      .then(() => this.#drain())
      .catch((error: unknown) => this.#deps.log.error('webhooks: delivery worker failed', { error: String(error) }))
      .finally(() => {
        this.#running = null;
        if (this.#again) {
          this.#again = false;
          this.kick();
        }
      });
  }

  /** Resolves when the current run (if any) has finished: for tests and orderly shutdown. */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #drain(): Promise<void> {
    const { webhookStore, clock, delayMs } = this.#deps;
    for (;;) {
      if (this.#stopped) return;
      const lease = this.#lease();
      const dueBy = new Date(Date.parse(lease.now) - delayMs).toISOString();
      // Claimed for this process: another worker claiming at once gets other deliveries. A failed
      // attempt keeps its claim until the lease passes, so this drain does not take it again.
      const batch = await webhookStore.claimPending(dueBy, BATCH, lease);
      if (batch.length === 0) break;
      // The claim is not renewed: a batch still being worked through when half its lease has passed
      // is left there (still claimed; taken again, by any process, once the lease passes) rather than
      // run on while another process may claim the same deliveries.
      const claimEnds = Date.parse(lease.until);
      const stopAt = claimEnds - (claimEnds - Date.parse(lease.now)) / 2;
      for (const delivery of batch) {
        if (this.#stopped) return;
        if (Date.parse(clock.now()) > stopAt) {
          this.#deps.log.warn('webhooks: a claimed batch outlasted half its lease; the rest is taken again when the lease passes', {
            left: batch.length - batch.indexOf(delivery),
          });
          break;
        }
        await this.#processOne(delivery);
        // The store is synchronous under its promises: let waiting requests (other deliveries' 202s) in.
        await yieldToIo();
      }
    }
    this.#scheduleDue();
  }

  /**
   * Processes one delivery as the work of its own: its log lines carry the delivery id as their
   * request id, what it changes is audited as the delivery's, and with tracing on it is a span.
   */
  #processInScope(delivery: PendingDelivery): Promise<ProcessOutcome> {
    const { processor, tracing } = this.#deps;
    const scope = { requestId: delivery.delivery_id, actor: { kind: 'github_delivery' as const, id: delivery.delivery_id } };
    const process = (traceparent?: string) =>
      runInRequestScope({ ...scope, traceparent }, () => processor.process(delivery.event, JSON.parse(delivery.payload) as unknown, delivery.workspace_id));
    if (!tracing) return process();
    const attributes = { 'acp.webhook.event': delivery.event, 'acp.webhook.delivery_id': delivery.delivery_id };
    return tracing.inSpan(`webhook ${delivery.event}`, { kind: 'consumer', attributes }, (span) => process(span.traceparent));
  }

  /** Processes one delivery; true when it is still pending (the attempt failed and is to be retried). */
  async #processOne(delivery: PendingDelivery): Promise<boolean> {
    const { webhookStore, clock, log } = this.#deps;
    try {
      const outcome = await this.#processInScope(delivery);
      await webhookStore.completeDelivery(delivery.delivery_id, { ...outcome, now: clock.now() });
      this.#deps.observer?.webhookDelivery(delivery.event, outcome.outcome);
      log.info('webhooks: delivery processed', {
        delivery_id: delivery.delivery_id,
        event: delivery.event,
        workspace_id: delivery.workspace_id,
        outcome: outcome.outcome,
        revisions: outcome.results.filter((r) => r.result === 'revision_created').length,
        skipped: outcome.results.filter((r) => r.result === 'skipped').length,
      });
      return false;
    } catch (error) {
      const giveUp = delivery.attempts + 1 >= MAX_ATTEMPTS;
      this.#deps.observer?.webhookDelivery(delivery.event, 'failed');
      log.error('webhooks: processing a delivery failed', {
        delivery_id: delivery.delivery_id,
        attempt: delivery.attempts + 1,
        giving_up: giveUp,
        error: String(error),
      });
      await webhookStore.recordFailedAttempt(
        delivery.delivery_id,
        `Processing failed ${delivery.attempts + 1} times; see the server log.`,
        giveUp,
        clock.now(),
      );
      return !giveUp;
    }
  }

  /** With a processing delay, wakes up when the oldest pending delivery becomes due. */
  #scheduleDue(): void {
    const { webhookStore, clock, delayMs } = this.#deps;
    if (delayMs === 0 || this.#stopped) return;
    webhookStore
      .oldestPendingReceivedAt()
      .then((at) => {
        if (!at || this.#stopped) return;
        if (this.#dueTimer) clearTimeout(this.#dueTimer);
        const wait = Math.max(0, Date.parse(at) + delayMs - Date.parse(clock.now())) + 5;
        this.#dueTimer = setTimeout(() => this.kick(), wait);
        this.#dueTimer.unref();
      })
      // A failed look-up (the database closing at shutdown) must not become an unhandled rejection.
      .catch((error: unknown) => this.#deps.log.warn('webhooks: could not schedule delayed processing', { error: String(error) }));
  }

  async #prune(): Promise<void> {
    const before = new Date(Date.parse(this.#deps.clock.now()) - DELIVERY_RETENTION_MS).toISOString();
    const removed = await this.#deps.webhookStore.pruneDeliveries(before);
    if (removed > 0) this.#deps.log.info('webhooks: pruned old deliveries', { removed });
  }
}

/** Resolves after the event loop has handled pending I/O (sockets first, then this). */
function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
