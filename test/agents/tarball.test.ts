import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { type Header, pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkGone } from '../../agent/client.ts';
import { downloadTarball, hoistSingleDirectory, onControlPlane, TarballRefused, unpackTarball } from '../../agent/tarball.ts';

type Entry = Partial<Header> & { name: string; content?: string };

/** A real gzip tarball with the given raw headers (types, link names, modes), as a hostile client could build it. */
async function tarball(entries: Entry[]): Promise<Buffer> {
  const tar = pack();
  const parts: Buffer[] = [];
  tar.on('data', (chunk: unknown) => void parts.push(chunk as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    tar.on('end', () => resolve());
    tar.on('error', reject);
  });
  for (const { content, ...header } of entries) {
    await new Promise<void>((resolve, reject) => tar.entry(header, content ?? '', (error) => (error ? reject(error) : resolve())));
  }
  tar.finalize();
  await ended;
  return gzipSync(Buffer.concat(parts));
}

/** Linux's shared-memory tmpfs, where there is one: files made there cost no disk journal. */
const MEMORY_BACKED = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

/** A fresh sandbox: `root/unpack` is where the tarball goes; anything written beside it is an escape. */
function place(bytes: Buffer, under = tmpdir()) {
  const root = mkdtempSync(join(under, 'cp-unpack-'));
  const file = join(root, 'upload.tar.gz');
  writeFileSync(file, bytes);
  return { root, file, dir: join(root, 'unpack') };
}

async function refusal(entries: Entry[]): Promise<{ message: string; root: string }> {
  const { root, file, dir } = place(await tarball(entries));
  const error = await unpackTarball(file, dir).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TarballRefused);
  return { message: (error as Error).message, root };
}

describe('unpacking an uploaded tarball', () => {
  it('unpacks files and directories, keeps the executable bit, drops setuid and group/world write', async () => {
    const { file, dir } = place(
      await tarball([
        { name: './langgraph.json', content: '{"graphs":{}}' },
        { name: 'src/', type: 'directory' },
        { name: 'src/graph.mjs', content: 'export const graph = 1;\n' },
        { name: 'bin/run.sh', content: '#!/bin/sh\n', mode: 0o4777 },
        { name: 'link-to-graph', type: 'symlink', linkname: 'src/graph.mjs' },
      ]),
    );
    expect(await unpackTarball(file, dir)).toEqual({ files: 3 });
    expect(readFileSync(join(dir, 'src/graph.mjs'), 'utf8')).toBe('export const graph = 1;\n');
    expect(readFileSync(join(dir, 'langgraph.json'), 'utf8')).toBe('{"graphs":{}}');
    expect(statSync(join(dir, 'bin/run.sh')).mode & 0o7777).toBe(0o755);
    expect(readFileSync(join(dir, 'link-to-graph'), 'utf8')).toBe('export const graph = 1;\n');
  });

  it('refuses an entry that climbs out with .., naming it, and writes nothing outside', async () => {
    const { message, root } = await refusal([
      { name: 'ok.txt', content: 'fine' },
      { name: '../evil', content: 'pwned' },
    ]);
    expect(message).toContain('"../evil"');
    expect(message).toMatch(/\.\./);
    expect(existsSync(join(root, 'evil'))).toBe(false);
    const deeper = await refusal([{ name: 'a/b/../../../evil2', content: 'pwned' }]);
    expect(deeper.message).toContain('"a/b/../../../evil2"');
    expect(existsSync(join(deeper.root, 'evil2'))).toBe(false);
  });

  it('refuses an absolute path, naming it', async () => {
    const target = join(mkdtempSync(join(tmpdir(), 'cp-abs-')), 'evil');
    const { message } = await refusal([{ name: target, content: 'pwned' }]);
    expect(message).toContain(`"${target}"`);
    expect(message).toMatch(/absolute/);
    expect(existsSync(target)).toBe(false);
  });

  it('refuses symbolic links that point outside, directly or through an earlier link', async () => {
    const out = await refusal([{ name: 'escape', type: 'symlink', linkname: '../../etc' }]);
    expect(out.message).toContain('"escape"');
    expect(out.message).toMatch(/outside/);
    const absolute = await refusal([{ name: 'passwd', type: 'symlink', linkname: '/etc/passwd' }]);
    expect(absolute.message).toContain('"passwd"');
    // `here -> .` is inside; `here/up -> ..` looks inside by its name, but really points above the directory.
    const chained = await refusal([
      { name: 'here', type: 'symlink', linkname: '.' },
      { name: 'here/up', type: 'symlink', linkname: '..' },
    ]);
    expect(chained.message).toContain('"here/up"');
    // A file written through a link to a directory outside: the link itself is refused first.
    const through = await refusal([
      { name: 'dir', type: 'symlink', linkname: '..' },
      { name: 'dir/evil', content: 'pwned' },
    ]);
    expect(through.message).toContain('"dir"');
    expect(existsSync(join(through.root, 'evil'))).toBe(false);
  });

  it('refuses hard links out, device files and FIFOs, naming the entry', async () => {
    expect((await refusal([{ name: 'hard', type: 'link', linkname: '../../etc/passwd' }])).message).toContain('"hard"');
    const device = await refusal([{ name: 'dev/null-ish', type: 'character-device', devmajor: 1, devminor: 3 }]);
    expect(device.message).toContain('"dev/null-ish"');
    expect(device.message).toMatch(/character-device/);
    expect((await refusal([{ name: 'disk', type: 'block-device', devmajor: 8, devminor: 0 }])).message).toContain('"disk"');
    expect((await refusal([{ name: 'pipe', type: 'fifo' }])).message).toContain('"pipe"');
  });

  it('a later entry of the same name replaces a link instead of writing through it', async () => {
    const { file, dir } = place(
      await tarball([
        { name: 'target.txt', content: 'original' },
        { name: 'name.txt', type: 'symlink', linkname: 'target.txt' },
        { name: 'name.txt', content: 'replacement' },
      ]),
    );
    await unpackTarball(file, dir);
    expect(lstatSync(join(dir, 'name.txt')).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(dir, 'name.txt'), 'utf8')).toBe('replacement');
    expect(readFileSync(join(dir, 'target.txt'), 'utf8')).toBe('original');
  });

  it('a tarball of one directory holding the config is built from that directory; otherwise nothing moves', async () => {
    const nested = place(
      await tarball([
        { name: 'my-app/langgraph.json', content: '{}' },
        { name: 'my-app/src/graph.mjs', content: 'x' },
      ]),
    );
    await unpackTarball(nested.file, nested.dir);
    expect(hoistSingleDirectory(nested.dir, 'langgraph.json')).toBe('my-app');
    expect(readdirSync(nested.dir).sort()).toEqual(['langgraph.json', 'src']);
    expect(readFileSync(join(nested.dir, 'src/graph.mjs'), 'utf8')).toBe('x');
    const flat = place(await tarball([{ name: 'langgraph.json', content: '{}' }]));
    await unpackTarball(flat.file, flat.dir);
    expect(hoistSingleDirectory(flat.dir, 'langgraph.json')).toBeNull();
    const elsewhere = place(await tarball([{ name: 'my-app/other.json', content: '{}' }]));
    await unpackTarball(elsewhere.file, elsewhere.dir);
    expect(hoistSingleDirectory(elsewhere.dir, 'langgraph.json')).toBeNull();
    expect(readdirSync(elsewhere.dir)).toEqual(['my-app']);
  });

  it('names the entry when writing it fails (a hard link to a directory)', async () => {
    const { message } = await refusal([
      { name: 'sub/', type: 'directory' },
      { name: 'hard', type: 'link', linkname: 'sub' },
    ]);
    expect(message).toContain('"hard" is a hard link to "sub", which is not a file of the tarball');
  });

  it('refuses data that is not a gzip tarball, and a tarball that unpacks beyond its cap', async () => {
    const notGzip = place(Buffer.from('just some text'));
    await expect(unpackTarball(notGzip.file, notGzip.dir)).rejects.toThrow(/not a readable gzip tarball/);
    const big = place(await tarball([{ name: 'big.bin', content: 'x'.repeat(100_000) }]));
    await expect(unpackTarball(big.file, big.dir, { maxUnpackedBytes: 50_000 })).rejects.toThrow(/more than 50000 bytes/);
  });

  it('unpacks small files in one write and large ones streamed, each whole, with the cap over both', async () => {
    const small = 'y'.repeat(1000);
    const large = Buffer.alloc(600_000, 7).toString('latin1');
    const both = place(
      await tarball([
        { name: 'a/small.txt', content: small },
        { name: 'a/large.bin', content: large },
      ]),
    );
    expect(await unpackTarball(both.file, both.dir)).toEqual({ files: 2 });
    expect(readFileSync(join(both.dir, 'a/small.txt'), 'utf8')).toBe(small);
    expect(readFileSync(join(both.dir, 'a/large.bin'))).toEqual(Buffer.from(large, 'latin1'));
    // The cap counts the small file's bytes too: the large one, streamed, passes it.
    const capped = place(
      await tarball([
        { name: 'small.txt', content: small },
        { name: 'large.bin', content: large },
      ]),
    );
    await expect(unpackTarball(capped.file, capped.dir, { maxUnpackedBytes: 400_000 })).rejects.toThrow(/more than 400000 bytes/);
  });
});

describe('downloading a tarball from the control plane', () => {
  let server: Server;
  let base: string;
  const seen: Array<string | undefined> = [];
  const body = Buffer.alloc(300_000, 7);
  beforeAll(async () => {
    // A real HTTP server on loopback standing in for the fetch route's answers.
    server = createServer((req, res) => {
      seen.push(req.headers.authorization);
      if (req.url === '/gone') {
        res.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Claim x is not held; stop this work.' }));
      } else if (req.url === '/forbidden') {
        res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'The source URL signature is not valid.' }));
      } else if (req.url === '/chunked') {
        // No Content-Length: the cap must hold while streaming.
        res.writeHead(200, { 'content-type': 'application/gzip' });
        res.write(body.subarray(0, 150_000));
        res.end(body.subarray(150_000));
      } else {
        res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': String(body.length) }).end(body);
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('streams to a file with the listener token, and refuses more than the cap whether declared or not', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cp-download-'));
    expect(await downloadTarball(`${base}/ok`, 'lat_token', join(dir, 'a.tar.gz'))).toBe(body.length);
    expect(readFileSync(join(dir, 'a.tar.gz')).equals(body)).toBe(true);
    expect(seen.at(-1)).toBe('Bearer lat_token');
    await expect(downloadTarball(`${base}/ok`, 't', join(dir, 'b.tar.gz'), { maxBytes: 100_000 })).rejects.toThrow(
      /300000 bytes, more than the limit of 100000/,
    );
    await expect(downloadTarball(`${base}/chunked`, 't', join(dir, 'c.tar.gz'), { maxBytes: 200_000 })).rejects.toThrow(/more than the limit of 200000 bytes/);
    await expect(downloadTarball(`${base}/gone`, 't', join(dir, 'd.tar.gz'))).rejects.toBeInstanceOf(WorkGone);
    await expect(downloadTarball(`${base}/forbidden`, 't', join(dir, 'e.tar.gz'))).rejects.toThrow(/403: The source URL signature is not valid/);
    expect(readdirSync(dir).filter((name) => name !== 'a.tar.gz' && name !== 'c.tar.gz')).toEqual([]);
  });
});

describe('where the agent fetches a work item’s tarball URL', () => {
  it('asks the control plane it was started with, keeping the route and its signed query, never another host', () => {
    const route = '/v2/listeners/l-1/agent/claims/c-1/source?expires=1&signature=abc';
    expect(onControlPlane(`http://localhost:8080${route}`, 'http://10.0.0.5:8080/')).toBe(`http://10.0.0.5:8080${route}`);
    expect(onControlPlane(`https://cp.example.com/prefix${route}`, 'https://internal.example/prefix')).toBe(`https://internal.example/prefix${route}`);
    expect(onControlPlane(`https://attacker.example${route}`, 'https://cp.example.com')).toBe(`https://cp.example.com${route}`);
    expect(() => onControlPlane('https://cp.example.com/somewhere/else', 'https://cp.example.com')).toThrow(TarballRefused);
    expect(() => onControlPlane('not a url', 'https://cp.example.com')).toThrow(/not a URL/);
  });
});

/**
 * The tarball attacks that got past name checks: a link chain the kernel resolves outside, a hard
 * link through it to a file of the machine, a device, and an entry flood. `root` holds a file
 * beside the unpack directory that stands for the control plane's key.
 */
describe('tarball attacks on the unpacker', () => {
  const withKey = (bytes: Buffer, under?: string) => {
    const placed = place(bytes, under);
    writeFileSync(join(placed.root, 'control-plane.db.key'), 'the-control-plane-key');
    return placed;
  };
  const refused = async (entries: Entry[]) => {
    const { root, file, dir } = withKey(await tarball(entries));
    const error = await unpackTarball(file, dir).then(
      () => null,
      (e: unknown) => e,
    );
    return { error: error as Error | null, root, dir };
  };

  it('refuses a link chain (y -> ., x -> y/..) that the kernel resolves outside, naming the entry', async () => {
    const { error, root } = await refused([
      { name: 'y', type: 'symlink', linkname: '.' },
      { name: 'x', type: 'symlink', linkname: 'y/..' },
      { name: 'langgraph.json', type: 'symlink', linkname: 'x/control-plane.db.key' },
    ]);
    expect(error).toBeInstanceOf(TarballRefused);
    expect(error!.message).toMatch(/"x" is a link to "y\/\.\.", which leads outside/);
    expect(readdirSync(root).sort()).toEqual(['control-plane.db.key', 'unpack', 'upload.tar.gz']);
  });

  it('refuses a link made harmless first and turned outside by a later entry', async () => {
    const { error } = await refused([
      { name: 'y/', type: 'directory' },
      { name: 'x', type: 'symlink', linkname: 'y/..' },
      { name: 'y', type: 'symlink', linkname: '.' },
    ]);
    expect(error).toBeInstanceOf(TarballRefused);
    expect(error!.message).toMatch(/"x" is a link that leads outside/);
  });

  it('refuses a hard link to a file outside (through a link) and to a link, and keeps one to its own file', async () => {
    const through = await refused([
      { name: 'up', type: 'symlink', linkname: 'sub/..' },
      { name: 'sub/', type: 'directory' },
      { name: 'key', type: 'link', linkname: 'up/../control-plane.db.key' },
    ]);
    expect(through.error).toBeInstanceOf(TarballRefused);
    expect(through.error!.message).toMatch(/"key"/);
    const dir = mkdtempSync(join(tmpdir(), 'cp-hl-'));
    writeFileSync(join(dir, 'secret'), 'outside');
    const viaLink = await refused([
      { name: 'out', type: 'symlink', linkname: '.' },
      { name: 'hard', type: 'link', linkname: 'out' },
    ]);
    expect(viaLink.error!.message).toMatch(/"hard" is a hard link to "out", which is not a file of the tarball/);
    const { file, dir: unpackDir } = withKey(
      await tarball([
        { name: 'a.txt', content: 'own' },
        { name: 'b.txt', type: 'link', linkname: 'a.txt' },
      ]),
    );
    await unpackTarball(file, unpackDir);
    expect(readFileSync(join(unpackDir, 'b.txt'), 'utf8')).toBe('own');
    expect(statSync(join(unpackDir, 'b.txt')).ino).toBe(statSync(join(unpackDir, 'a.txt')).ino);
  });

  it('refuses a device file naming it', async () => {
    const { error, dir } = await refused([{ name: 'dev/null-ish', type: 'character-device', devmajor: 1, devminor: 3 }]);
    expect(error!.message).toMatch(/"dev\/null-ish" is a character-device/);
    expect(existsSync(join(dir, 'dev/null-ish'))).toBe(false);
  });

  it('refuses the entry past the cap, and a small gzip naming 200,000 files at the default cap', { timeout: 240_000 }, async () => {
    const few: Entry[] = Array.from({ length: 200 }, (_, i) => ({ name: `f${i}` }));
    const small = withKey(await tarball(few));
    const capped = await unpackTarball(small.file, small.dir, { maxEntries: 150 }).then(
      () => null,
      (x: unknown) => x as Error,
    );
    expect(capped).toBeInstanceOf(TarballRefused);
    expect(capped!.message).toMatch(/"f150" is one more than the 150 entries/);
    expect(readdirSync(small.dir).length).toBe(150);

    // The 100,000 files unpacked before the refusal go to memory (tmpfs) where the machine has it:
    // creating them on a disk's journal took 60–240 s of a loaded run; the cap is what is tested.
    const flood = withKey(await tarball(Array.from({ length: 200_000 }, (_, i) => ({ name: `d${i % 100}/f${i}` }))), MEMORY_BACKED);
    try {
      expect(statSync(flood.file).size).toBeLessThan(4 * 1024 * 1024);
      const error = await unpackTarball(flood.file, flood.dir).then(
        () => null,
        (x: unknown) => x as Error,
      );
      expect(error).toBeInstanceOf(TarballRefused);
      expect(error!.message).toMatch(/"d0\/f100000" is one more than the 100000 entries a tarball may hold/);
      expect(readdirSync(join(flood.dir, 'd0')).length).toBe(1000);
    } finally {
      rmSync(flood.root, { recursive: true, force: true });
    }
  });
});
