import {
  createReadStream,
  createWriteStream,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract, type Header } from 'tar-stream';
import { WorkGone } from './client.ts';

/** The upload cap of the contract (§4): a tarball the server stored is never bigger. */
export const MAX_TARBALL_BYTES = 200 * 1024 * 1024;
/** A tarball that unpacks to more than this is refused (a gzip bomb would otherwise fill the disk). */
export const MAX_UNPACKED_BYTES = 2 * 1024 ** 3;
/** Entries of one tarball at most: a few megabytes of gzip can name millions of empty files. */
export const MAX_ENTRIES = 100_000;
/** Files up to this size are unpacked in one write (the rest are streamed to disk). */
const IN_ONE_WRITE_BYTES = 256 * 1024;

/** The tarball cannot be used: an unsafe or unreadable entry, or a failed download. Ends the build. */
export class TarballRefused extends Error {
  override readonly name = 'TarballRefused';
}

/**
 * Downloads the uploaded tarball of a claim to `file`, streamed to disk (never held whole), with
 * the listener token; more than `maxBytes` is cut off and refused. A 409 means the claim ended.
 */
export async function downloadTarball(url: string, token: string, file: string, options: { maxBytes?: number; signal?: AbortSignal } = {}): Promise<number> {
  const maxBytes = options.maxBytes ?? MAX_TARBALL_BYTES;
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: options.signal });
  if (response.status === 409) throw new WorkGone(await detailOf(response));
  if (!response.ok || !response.body) throw new TarballRefused(`the control plane answered ${response.status}: ${await detailOf(response)}`);
  const declared = Number(response.headers.get('content-length'));
  if (declared > maxBytes) {
    await response.body.cancel();
    throw new TarballRefused(`the tarball is ${declared} bytes, more than the limit of ${maxBytes}`);
  }
  let received = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      if (received > maxBytes) done(new TarballRefused(`the tarball is more than the limit of ${maxBytes} bytes`));
      else done(null, chunk);
    },
  });
  // The tarball is a tenant's source: owner-only, as everything of the agent's own (the mode is
  // narrowed by the umask, never widened; a file left by an earlier attempt is replaced).
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  rmSync(file, { force: true });
  await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>), cap, createWriteStream(file, { mode: 0o600 }), {
    signal: options.signal,
  });
  return received;
}

/**
 * The fetch URL's route on the control plane the agent was started with (`--url`, maybe with a
 * path prefix): its token goes nowhere else, and a `PUBLIC_URL` the agent's network cannot reach
 * (the default `http://localhost:<port>`, seen from another machine) does not matter.
 */
export function onControlPlane(url: string, base: string): string {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    throw new TarballRefused('The work item names a tarball URL that is not a URL.');
  }
  const at = target.pathname.lastIndexOf('/v2/listeners/');
  if (at < 0) throw new TarballRefused('The work item names a tarball URL that is not an agent route.');
  return `${base.replace(/\/+$/, '')}${target.pathname.slice(at)}${target.search}`;
}

/**
 * Unpacks a gzip tarball into `dir`, entry by entry. Refused, naming the entry: a path that is
 * absolute or climbs out with `..`; a symbolic or hard link whose target lies outside `dir`; a
 * device file or FIFO; an entry whose parent directory resolves outside `dir` (through a link an
 * earlier entry made). What was unpacked before a refusal is left for the caller to remove.
 */
export async function unpackTarball(file: string, dir: string, options: { maxUnpackedBytes?: number; maxEntries?: number } = {}): Promise<{ files: number }> {
  const maxUnpacked = options.maxUnpackedBytes ?? MAX_UNPACKED_BYTES;
  const maxEntries = options.maxEntries ?? MAX_ENTRIES;
  mkdirSync(dir, { recursive: true });
  const root = realpathSync(dir);
  let files = 0;
  let entries = 0;
  let unpacked = 0;
  /** Regular files this tarball wrote (real paths): the only targets a hard link may name. */
  const written = new Set<string>();
  /** Links made, checked again at the end: a later entry can change where an earlier link leads. */
  const links: Array<{ path: string; name: string }> = [];
  const tar = extract();
  tar.on('entry', (header, stream, next) => {
    // Destroying the extractor destroys the entry with the same error; the pipeline below reports it.
    stream.on('error', () => undefined);
    const fail = (error: unknown) => {
      stream.resume();
      tar.destroy(
        error instanceof TarballRefused
          ? error
          : new TarballRefused(`The tarball entry "${header.name}" could not be unpacked: ${(error as Error).message ?? String(error)}`),
      );
    };
    entries += 1;
    if (entries > maxEntries) {
      fail(new TarballRefused(`The tarball entry "${header.name}" is one more than the ${maxEntries} entries a tarball may hold.`));
      return;
    }
    let target: string | null;
    /** Where a file entry really lands: its parent's real path and its name. */
    let landsAt = '';
    try {
      target = placeOf(root, header);
    } catch (error) {
      fail(error);
      return;
    }
    if (target === null) {
      // Metadata entries (pax headers tar-stream hands on): nothing to write.
      stream.on('end', () => next());
      stream.resume();
      return;
    }
    try {
      if (header.type === 'directory') {
        mkdirSync(target, { recursive: true });
        insideRoot(root, realpathSync(target), header.name);
        stream.on('end', () => next());
        stream.resume();
        return;
      }
      mkdirSync(dirname(target), { recursive: true });
      // A parent made a link by an earlier entry could lead anywhere: where it really is must be inside.
      const parent = realpathSync(dirname(target));
      insideRoot(root, parent, header.name);
      landsAt = join(parent, basename(target));
      removeExisting(target);
      if (header.type === 'symlink') {
        // Resolved as the kernel will, through the links already there: `y -> .` then
        // `x -> y/..` is lexically inside, really the parent of the checkout.
        if (!isInside(root, resolveAsKernel(`${parent}/${header.linkname!}`)))
          throw new TarballRefused(`The tarball entry "${header.name}" is a link to "${header.linkname}", which leads outside the tarball.`);
        symlinkSync(header.linkname!, target);
        links.push({ path: target, name: header.name });
        stream.on('end', () => next());
        stream.resume();
        return;
      }
      if (header.type === 'link') {
        // Only to a regular file this tarball wrote, found without following any link: a hard
        // link made through a link chain would be the machine's file itself (a key, a database).
        const source = resolveAsKernel(`${root}/${stripDot(header.linkname!)}`, { followLast: false });
        if (!written.has(source) || !lstatSync(source).isFile())
          throw new TarballRefused(`The tarball entry "${header.name}" is a hard link to "${header.linkname}", which is not a file of the tarball.`);
        linkSync(source, target);
        stream.on('end', () => next());
        stream.resume();
        return;
      }
    } catch (error) {
      fail(error);
      return;
    }
    files += 1;
    // Only permission bits, at most rwxr-xr-x: no setuid, setgid or world-writable files.
    const mode = (header.mode ?? 0o644) & 0o755;
    if ((header.size ?? 0) <= IN_ONE_WRITE_BYTES) {
      // Most of a source tree: read whole, then written in one call. Three streams and three
      // thread-pool round trips a file made a tarball of 100,000 small files take 65 s to unpack.
      const chunks: Buffer[] = [];
      let refused = false;
      stream.on('data', (data: unknown) => {
        const chunk = data as Buffer;
        if (refused) return;
        unpacked += chunk.length;
        if (unpacked > maxUnpacked) {
          refused = true;
          fail(new TarballRefused(`the tarball unpacks to more than ${maxUnpacked} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      stream.on('end', () => {
        if (refused) return;
        try {
          writeFileSync(landsAt, Buffer.concat(chunks), { flag: 'wx', mode });
        } catch (error) {
          fail(error);
          return;
        }
        written.add(landsAt);
        next();
      });
      return;
    }
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        unpacked += chunk.length;
        if (unpacked > maxUnpacked) done(new TarballRefused(`the tarball unpacks to more than ${maxUnpacked} bytes`));
        else done(null, chunk);
      },
    });
    pipeline(stream, counter, createWriteStream(target, { flags: 'wx', mode })).then(() => {
      written.add(landsAt);
      next();
    }, fail);
  });
  try {
    await pipeline(createReadStream(file), createGunzip(), tar);
  } catch (error) {
    if (error instanceof TarballRefused) throw error;
    throw new TarballRefused(`the upload is not a readable gzip tarball (${(error as Error).message})`);
  }
  for (const link of links) {
    let stat;
    try {
      stat = lstatSync(link.path);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink() && !isInside(root, resolveAsKernel(link.path))) {
      throw new TarballRefused(`The tarball entry "${link.name}" is a link that leads outside the tarball (through the links of later entries).`);
    }
  }
  return { files };
}

/**
 * Where `path` leads as the kernel resolves it: each component in turn, every symbolic link along
 * it followed (its target read relative to the real directory it is in, `..` taken after the
 * link, not before), at most 40 links as Linux allows. Components that do not exist (yet) are
 * appended as written. `followLast: false` leaves a link in the last component unfollowed, as
 * link(2) does.
 */
export function resolveAsKernel(path: string, options: { followLast?: boolean } = {}): string {
  const followLast = options.followLast ?? true;
  let pending = path.split('/').filter((part) => part !== '' && part !== '.');
  let current = '/';
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '.') continue;
    if (part === '..') {
      current = dirname(current);
      continue;
    }
    const next = current === '/' ? `/${part}` : `${current}/${part}`;
    let stat;
    try {
      stat = lstatSync(next);
    } catch {
      return resolve(current, part, ...pending);
    }
    if (!stat.isSymbolicLink() || (!followLast && pending.length === 0)) {
      current = next;
      continue;
    }
    hops += 1;
    if (hops > 40) throw new TarballRefused(`too many levels of links at "${next}"`);
    const target = readlinkSync(next);
    if (isAbsolute(target)) current = '/';
    pending = [...target.split('/').filter((p) => p !== '' && p !== '.'), ...pending];
  }
  return current;
}

/**
 * A tarball packed with its directory as the top entry (`my-app/langgraph.json`) where the
 * config path names `langgraph.json`: that directory's contents move up into `dir`, so the
 * config path means the same either way. Answers the directory moved up, or null when nothing moved.
 */
export function hoistSingleDirectory(dir: string, configPath: string): string | null {
  if (existsSync(join(dir, configPath))) return null;
  const top = readdirSync(dir);
  if (top.length !== 1) return null;
  const only = join(dir, top[0]!);
  if (!lstatSync(only).isDirectory() || !existsSync(join(only, configPath))) return null;
  const moved = join(dir, `.hoist-${process.pid}-${Date.now()}`);
  renameSync(only, moved);
  for (const name of readdirSync(moved)) renameSync(join(moved, name), join(dir, name));
  rmSync(moved, { recursive: true, force: true });
  return top[0]!;
}

/** Where an entry goes under `root`; null for entries that write nothing; refuses unsafe ones. */
function placeOf(root: string, header: Header): string | null {
  const name = header.name;
  // tar-stream consumes these itself; should one come through, it names no file.
  if (['pax-header', 'pax-global-header', 'gnu-long-path', 'gnu-long-link-path'].includes(header.type as string)) return null;
  if (!['file', 'contiguous-file', 'directory', 'symlink', 'link'].includes(header.type ?? 'file')) {
    throw new TarballRefused(`The tarball entry "${name}" is a ${header.type}; only files, directories and links inside the tarball are unpacked.`);
  }
  if (isAbsolute(name) || /^[A-Za-z]:[\\/]/.test(name)) throw new TarballRefused(`The tarball entry "${name}" has an absolute path; entries must be relative.`);
  const relativeName = stripDot(name);
  if (relativeName.split(/[\\/]/).includes('..')) throw new TarballRefused(`The tarball entry "${name}" climbs out of the tarball with "..".`);
  if (relativeName === '' || relativeName === '.') return header.type === 'directory' ? root : null;
  const target = resolve(root, relativeName);
  insideRoot(root, target, name);
  if (header.type === 'symlink') {
    const link = header.linkname ?? '';
    if (isAbsolute(link)) throw new TarballRefused(`The tarball entry "${name}" is a link to the absolute path "${link}"; links must stay inside the tarball.`);
    if (!isInside(root, resolve(dirname(target), link))) throw new TarballRefused(`The tarball entry "${name}" is a link to "${link}", outside the tarball.`);
  }
  if (header.type === 'link') {
    const link = header.linkname ?? '';
    if (isAbsolute(link) || stripDot(link).split(/[\\/]/).includes('..') || !isInside(root, resolve(root, stripDot(link)))) {
      throw new TarballRefused(`The tarball entry "${name}" is a hard link to "${link}", outside the tarball.`);
    }
  }
  return target;
}

function stripDot(path: string): string {
  return path.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
}

function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

function insideRoot(root: string, path: string, name: string): void {
  if (!isInside(root, path)) throw new TarballRefused(`The tarball entry "${name}" would be written outside the tarball's directory.`);
}

/** A later entry of the same name replaces an earlier one (as tar does), never writes through it. */
function removeExisting(target: string): void {
  // Most entries are new: asked without an exception, which cost a fifth of a 100,000-file unpack.
  if (lstatSync(target, { throwIfNoEntry: false }) === undefined) return;
  rmSync(target, { recursive: true, force: true });
}

async function detailOf(response: Response): Promise<string> {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { detail?: unknown };
    return typeof body.detail === 'string' ? body.detail : text.slice(0, 500);
  } catch {
    return text.slice(0, 500);
  }
}
