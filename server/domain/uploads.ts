import { createHmac, timingSafeEqual } from 'node:crypto';
import { Readable } from 'node:stream';
import type { UploadUrl } from '../../shared/schemas/deployment.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import type { WorkLease } from '../store/types.ts';
import type { UploadRecord, UploadStore } from '../store/uploads.ts';
import { BadRequest, Conflict, Forbidden, NotFound, PayloadTooLarge } from './errors.ts';
import { leaseFromNow } from './work-lease.ts';

/** Chunk rows are at most this big: a PUT holds at most one chunk in memory at a time. */
export const UPLOAD_CHUNK_BYTES = 1024 * 1024;
/** How much of an oversized body is read and discarded before the 413 (beyond it, the connection is cut). */
const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024;
/** Where the signed `PUT` goes; the signature authorizes it, no API key. */
export const UPLOAD_PATH_PREFIX = '/v1/uploads/';

export type UploadsDeps = {
  store: UploadStore;
  clock: Clock;
  log: Logger;
  /** HMAC key for upload URLs (derived from the encryption key). */
  signingKey: Buffer;
  publicUrl: () => string;
  ttlMs: number;
  maxBytes: number;
  /** Bytes of complete tarballs one workspace may keep: one tenant cannot fill the disk that every tenant's database lives on. */
  workspaceQuotaBytes: number;
  /** This server process: the receiver its uploads in progress name. */
  processId: string;
  /** `PIPELINE_LEASE_MS`: an upload whose receiver has not renewed it for this long was cut off by that process's death. */
  leaseMs: number;
};

/** URLs one deployment may hold open at once (issued, not yet used or expired). */
export const MAX_OPEN_UPLOAD_URLS = 5;

/**
 * Source tarballs of `internal_source` deployments: signed, expiring, single-use upload URLs on
 * this server; the `PUT` streamed into chunk rows (never buffered whole); a stream to read one back.
 */
export class Uploads {
  readonly #deps: UploadsDeps;
  #timer: NodeJS.Timeout | undefined;

  constructor(deps: UploadsDeps) {
    this.#deps = deps;
  }

  get maxBytes(): number {
    return this.#deps.maxBytes;
  }

  /** `POST …/upload-url` for a deployment the caller has already found in its workspace. */
  async issue(tenantId: string, deploymentId: string): Promise<UploadUrl> {
    const { store, clock, ttlMs, publicUrl } = this.#deps;
    const now = clock.now();
    // Tarballs no revision uses are kept one URL lifetime (time enough for the PATCH that names them), then dropped.
    await store.removeStaleUploads(deploymentId, now, new Date(Date.parse(now) - ttlMs).toISOString());
    if ((await store.openUploadCount(deploymentId, now)) >= MAX_OPEN_UPLOAD_URLS) {
      throw new Conflict(`This deployment already has ${MAX_OPEN_UPLOAD_URLS} upload URLs open; use one, or wait until they expire.`);
    }
    const used = await store.workspaceUploadBytes(tenantId);
    if (used >= this.#deps.workspaceQuotaBytes) {
      throw new BadRequest(
        `The workspace's stored tarballs take ${used} bytes, its quota (UPLOAD_WORKSPACE_QUOTA_BYTES) is ${this.#deps.workspaceQuotaBytes}: delete deployments or revisions it no longer needs.`,
      );
    }
    const id = crypto.randomUUID();
    const expires = Date.parse(now) + ttlMs;
    const objectPath = `deployments/${deploymentId}/uploads/${id}.tar.gz`;
    await store.createUpload({
      id,
      deployment_id: deploymentId,
      tenant_id: tenantId,
      object_path: objectPath,
      expires_at: new Date(expires).toISOString(),
      created_at: now,
    });
    const signature = this.#sign(id, expires);
    return { upload_url: `${publicUrl()}${UPLOAD_PATH_PREFIX}${id}?expires=${expires}&signature=${signature}`, object_path: objectPath };
  }

  /**
   * The signed `PUT`: checks the signature and expiry, claims the URL (one PUT at a time; none after
   * a complete one), then streams the body into chunk rows. A body over the cap, one that is not
   * gzip, or a broken stream removes what was written and leaves nothing stored.
   */
  async receive(input: {
    id: string;
    expires: string | undefined;
    signature: string | undefined;
    declaredLength: number | null;
    /**
     * Opens the body only once the checks passed: a body left unopened is drained by the HTTP
     * server after a refusal, while an opened, unread one would hold the connection up.
     */
    body: () => ReadableStream<Uint8Array> | null;
  }): Promise<{ object_path: string; size: number }> {
    const { store, clock, maxBytes, log } = this.#deps;
    const expires = Number(input.expires);
    if (!input.signature || !Number.isSafeInteger(expires) || !this.#verify(input.id, expires, input.signature)) {
      throw new Forbidden('The upload URL signature is not valid.');
    }
    if (Date.parse(clock.now()) > expires) throw new Forbidden('The upload URL has expired; ask for a new one (POST …/upload-url).');
    const upload = await store.getUpload(input.id);
    if (!upload) throw new NotFound('The upload URL is not known (its deployment may have been deleted).');
    if (input.declaredLength !== null && input.declaredLength > maxBytes)
      throw new PayloadTooLarge(`The tarball is larger than the limit of ${maxBytes} bytes.`);
    const claim = await store.claimUpload(input.id, this.#lease());
    if (claim === 'not_found') throw new NotFound('The upload URL is not known (its deployment may have been deleted).');
    if (claim === 'used') throw new Conflict('The upload URL has already been used; ask for a new one (POST …/upload-url).');
    if (claim === 'in_use') throw new Conflict('Another upload to this URL is in progress.');
    try {
      const size = await this.#streamIn(upload, input.body(), input.declaredLength);
      if (!(await store.completeUpload(upload.id, size, clock.now(), this.#deps.processId))) {
        // This process stalled past its lease and another released the upload: what it wrote is gone.
        throw new Conflict('The upload was interrupted on the server; PUT the tarball again.');
      }
      log.info('upload stored', { deployment_id: upload.deployment_id, upload_id: upload.id, bytes: size });
      return { object_path: upload.object_path, size };
    } catch (error) {
      await store.releaseUpload(upload.id, this.#deps.processId);
      throw error;
    }
  }

  /**
   * Streams the body into chunk rows. The workspace's quota is reserved before any byte is stored
   * (the declared length at once, when there is one, so a tarball that cannot fit is refused before
   * its body is read; otherwise chunk by chunk), so that PUTs running at the same time, in any
   * process, never store more than the quota together. The reservation settles into the upload's
   * size when it completes and is given back when it fails (`releaseUpload`).
   */
  async #streamIn(upload: UploadRecord, body: ReadableStream<Uint8Array> | null, declaredLength: number | null): Promise<number> {
    const { store, maxBytes } = this.#deps;
    if (!body) throw new BadRequest('The body is empty; PUT a gzip tarball.');
    const reader = body.getReader();
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let total = 0;
    let seq = 0;
    let reserved = 0;
    const reserve = async (upTo: number) => {
      if (upTo <= reserved) return;
      const fits = await store.reserveUploadBytes({
        id: upload.id,
        tenantId: upload.tenant_id,
        owner: this.#deps.processId,
        bytes: upTo - reserved,
        quotaBytes: this.#deps.workspaceQuotaBytes,
      });
      if (!fits)
        throw new PayloadTooLarge(
          `The tarball does not fit in what is left of the workspace's upload quota (UPLOAD_WORKSPACE_QUOTA_BYTES, ${this.#deps.workspaceQuotaBytes} bytes).`,
        );
      reserved = upTo;
    };
    const flush = async () => {
      if (pendingBytes === 0) return;
      const data = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await reserve(seq * UPLOAD_CHUNK_BYTES + data.length);
      await store.writeChunk(upload.id, seq++, data);
    };
    try {
      if (declaredLength !== null && declaredLength > 0) await reserve(declaredLength);
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch {
          throw new BadRequest('The upload was cut off before its end; nothing was stored.');
        }
        const { done, value } = chunk;
        if (done) break;
        if (total === 0 && value.length > 0 && value[0] !== 0x1f)
          throw new BadRequest('The body is not gzip data; PUT a gzip-compressed tarball (Content-Type: application/gzip).');
        if (total === 1 || (total === 0 && value.length > 1)) {
          const second = total === 1 ? value[0] : value[1];
          if (second !== 0x8b) throw new BadRequest('The body is not gzip data; PUT a gzip-compressed tarball (Content-Type: application/gzip).');
        }
        total += value.length;
        if (total > maxBytes) throw new PayloadTooLarge(`The tarball is larger than the limit of ${maxBytes} bytes.`);
        let offset = 0;
        while (offset < value.length) {
          const take = Math.min(UPLOAD_CHUNK_BYTES - pendingBytes, value.length - offset);
          pending.push(Buffer.from(value.buffer, value.byteOffset + offset, take));
          pendingBytes += take;
          offset += take;
          if (pendingBytes === UPLOAD_CHUNK_BYTES) await flush();
        }
      }
    } catch (error) {
      // Read on (and discard) a moderately sized rest, so the client gets the answer, not a reset.
      await drain(reader, DRAIN_LIMIT_BYTES);
      throw error;
    } finally {
      reader.releaseLock();
    }
    if (total < 2) throw new BadRequest('The body is not gzip data; PUT a gzip-compressed tarball (Content-Type: application/gzip).');
    await flush();
    return total;
  }

  /** Whether `objectPath` names a completed upload of this deployment. */
  async isUploaded(deploymentId: string, objectPath: string): Promise<boolean> {
    return (await this.#deps.store.findCompleteUpload(deploymentId, objectPath)) !== null;
  }

  /**
   * The uploaded tarball as a stream, one chunk row at a time (the sandbox reads it; a listener
   * agent fetches it through a signed URL, see `fetchUrl`). Null when there is no such upload.
   */
  async open(deploymentId: string, objectPath: string): Promise<Readable | null> {
    return (await this.read(deploymentId, objectPath))?.stream ?? null;
  }

  /** `open`, with the size the upload was stored with (the fetch route answers it as Content-Length). */
  async read(deploymentId: string, objectPath: string): Promise<{ size: number; stream: Readable } | null> {
    const { store } = this.#deps;
    const upload = await store.findCompleteUpload(deploymentId, objectPath);
    if (!upload) return null;
    // Pulled one row per read: a slow reader holds one chunk in memory, never the whole tarball.
    async function* chunks() {
      for (let seq = 0; ; seq++) {
        const chunk = await store.readChunk(upload!.id, seq);
        if (!chunk) return;
        yield chunk;
      }
    }
    return { size: upload.size ?? 0, stream: Readable.from(chunks(), { objectMode: false }) };
  }

  /**
   * A signed, expiring URL on this server for reading an upload back at `path` (the listener
   * agent's fetch route), bound to `subject` (what the route checks it against, e.g. a claim).
   * Signed with the upload key under another prefix, so an upload URL's signature never fits it.
   */
  fetchUrl(path: string, subject: string): string {
    const expires = Date.parse(this.#deps.clock.now()) + this.#deps.ttlMs;
    return `${this.#deps.publicUrl()}${path}?expires=${expires}&signature=${this.#signFetch(subject, expires)}`;
  }

  /** Checks a `fetchUrl` signature for `subject`: 403 when it does not fit or has expired. */
  checkFetch(subject: string, expires: string | undefined, signature: string | undefined): void {
    const at = Number(expires);
    if (!signature || !Number.isSafeInteger(at) || !equal(this.#signFetch(subject, at), signature))
      throw new Forbidden('The source URL signature is not valid.');
    if (Date.parse(this.#deps.clock.now()) > at) throw new Forbidden('The source URL has expired; the agent gets a new one with its next claim.');
  }

  /** The periodic sweep: expired URLs and tarballs no revision named within a URL lifetime, of every deployment. */
  sweep(): Promise<number> {
    const now = this.#deps.clock.now();
    return this.#deps.store.removeStaleUploads(null, now, new Date(Date.parse(now) - this.#deps.ttlMs).toISOString());
  }

  /** Uploads cut off by the death of the process receiving them keep nothing (their receiver's lease has passed). */
  releaseInterrupted(): Promise<number> {
    return this.#deps.store.releaseInterruptedUploads(this.#deps.clock.now());
  }

  /**
   * Releases interrupted uploads now, then every third of a lease renews the leases of the uploads
   * this process is receiving (one UPDATE) and releases those whose receiving process is gone.
   */
  async start(): Promise<void> {
    await this.releaseInterrupted();
    if (this.#timer) return;
    this.#timer = setInterval(
      () => {
        this.#deps.store
          .renewUploadLeases(this.#lease())
          .then(() => this.releaseInterrupted())
          .then(
            (released) => released > 0 && this.#deps.log.warn('uploads: released uploads whose receiving process stopped renewing them', { released }),
            (error: unknown) => this.#deps.log.warn('uploads: renewing upload leases failed; retried shortly', { error: String(error) }),
          );
      },
      Math.max(50, Math.floor(this.#deps.leaseMs / 3)),
    );
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #lease(): WorkLease {
    return leaseFromNow(this.#deps.clock, this.#deps.processId, this.#deps.leaseMs);
  }

  #sign(id: string, expires: number): string {
    return createHmac('sha256', this.#deps.signingKey).update(`upload:${id}:${expires}`).digest('base64url');
  }

  #verify(id: string, expires: number, signature: string): boolean {
    return equal(this.#sign(id, expires), signature);
  }

  #signFetch(subject: string, expires: number): string {
    return createHmac('sha256', this.#deps.signingKey).update(`fetch:${subject}:${expires}`).digest('base64url');
  }
}

function equal(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Reads and discards up to `limit` more bytes; stops early at the end or on an error. */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>, limit: number): Promise<void> {
  let drained = 0;
  try {
    while (drained <= limit) {
      const { done, value } = await reader.read();
      if (done) return;
      drained += value.length;
    }
  } catch {
    // the client went away: nothing to answer
  }
}
