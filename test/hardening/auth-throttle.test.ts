import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthThrottle, groupOf } from '../../server/domain/auth-throttle.ts';
import { TooManyRequests } from '../../server/domain/errors.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const oldSpaceUsed = () => getHeapSpaceStatistics().find((space) => space.space_name === 'old_space')!.space_used_size;

/** GET from a chosen loopback source address (the whole 127/8 is loopback on Linux). */
function getFrom(
  server: ServerProcess,
  from: string,
  key: string,
  path = '/v2/deployments',
): Promise<{ status: number; retryAfter: string | undefined; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, path, localAddress: from, headers: { 'x-api-key': key }, agent: false }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('API-key guessing is throttled per client address', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ AUTH_FAILURE_BURST: '5', AUTH_FAILURES_PER_MINUTE: '6' });
  });
  afterAll(() => server?.kill());

  it('past the burst an address gets 429 with Retry-After, even for the right key; other addresses are unaffected', async () => {
    for (let i = 0; i < 5; i += 1) expect((await getFrom(server, '127.0.0.2', `wrong-${i}`)).status).toBe(401);
    const throttled = await getFrom(server, '127.0.0.2', 'wrong-again');
    expect(throttled.status).toBe(429);
    expect(typeof throttled.body.detail).toBe('string');
    expect(Number(throttled.retryAfter)).toBeGreaterThanOrEqual(1);
    // A right guess is refused as well while throttled: otherwise throttling would not slow guessing.
    expect((await getFrom(server, '127.0.0.2', server.apiKey)).status).toBe(429);

    expect((await getFrom(server, '127.0.0.4', 'wrong')).status).toBe(401);
    expect((await getFrom(server, '127.0.0.4', server.apiKey)).status).toBe(200);
  });

  it('a key that already worked from an address keeps working there while a neighbour behind it guesses', async () => {
    expect((await getFrom(server, '127.0.0.3', server.apiKey)).status).toBe(200);
    for (let i = 0; i < 8; i += 1) await getFrom(server, '127.0.0.3', `guess-${i}`);
    expect((await getFrom(server, '127.0.0.3', 'guess-more')).status).toBe(429);
    expect((await getFrom(server, '127.0.0.3', server.apiKey)).status).toBe(200);
  });
});

describe('the throttle table stays bounded whatever the number of addresses', () => {
  it('10,000 guessing addresses leave at most maxAddresses buckets, and together guess no faster than the overflow bucket allows', () => {
    let now = 0;
    const throttle = new AuthThrottle({ burst: 3, perMinute: 60, maxAddresses: 100, now: () => now });
    let refused = 0;
    for (let i = 0; i < 10_000; i += 1) {
      const address = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      try {
        throttle.admit(address, 'h');
        throttle.failed(address);
      } catch (error) {
        expect(error).toBeInstanceOf(TooManyRequests);
        refused += 1;
      }
    }
    expect(throttle.size).toBeLessThanOrEqual(100);
    // 100 addresses × 3 + the overflow's 3 got through; the rest were refused.
    expect(refused).toBeGreaterThanOrEqual(10_000 - 100 * 3 - 3);
    // Time passes: buckets refill, and fresh addresses get their own again.
    now += 60_000;
    expect(() => throttle.admit('192.0.2.1', 'h')).not.toThrow();
  });

  it('a full table makes room by dropping the address seen least recently (to the second)', () => {
    let now = 0;
    const throttle = new AuthThrottle({ burst: 3, perMinute: 1, maxAddresses: 2, now: () => now });
    throttle.succeeded('192.0.2.1', 'key');
    for (let i = 0; i < 3; i += 1) throttle.failed('192.0.2.2');
    expect(() => throttle.admit('192.0.2.2', 'guess')).toThrow(TooManyRequests);
    // .1 is seen again later than .2's last failure; a success from a third address then pushes out .2.
    now += 2_000;
    throttle.succeeded('192.0.2.1', 'key');
    throttle.succeeded('192.0.2.3', 'key');
    expect(throttle.size).toBe(2);
    expect(() => throttle.admit('192.0.2.2', 'guess')).not.toThrow();
  });

  it('admitKnownKey (the cached check) refuses exactly where admit throws, and records a success where it admits', () => {
    const now = 0;
    const throttle = new AuthThrottle({ burst: 2, perMinute: 1, maxAddresses: 10, now: () => now });
    throttle.succeeded('2001:db8::1', 'good');
    for (let i = 0; i < 2; i += 1) throttle.failed('2001:db8::2');
    // The same /64: the guesses spent the bucket; the key that worked there before still passes.
    expect(() => throttle.admit('2001:db8::3', 'other')).toThrow(TooManyRequests);
    expect(throttle.admitKnownKey('2001:db8::3', 'other')).toBe(false);
    expect(throttle.admitKnownKey('2001:db8::3', 'good')).toBe(true);
    // A key admitted from a fresh address is remembered as good there, as `succeeded` does.
    expect(throttle.admitKnownKey('192.0.2.9', 'fresh')).toBe(true);
    for (let i = 0; i < 2; i += 1) throttle.failed('192.0.2.9');
    expect(() => throttle.admit('192.0.2.9', 'fresh')).not.toThrow();
    expect(() => throttle.admit('192.0.2.9', 'guess')).toThrow(TooManyRequests);
    expect(throttle.admitKnownKey(undefined, 'anything')).toBe(true);
  });

  it('admitKnownKey of a key already good at an address keeps that address recent, as a success does: a full table drops the other', () => {
    let now = 0;
    const throttle = new AuthThrottle({ burst: 3, perMinute: 1, maxAddresses: 2, now: () => now });
    throttle.succeeded('192.0.2.1', 'key');
    for (let i = 0; i < 3; i += 1) throttle.failed('192.0.2.2');
    // .1's key is good there: only its recency changes (to the second), later than .2's failures.
    now += 2_000;
    expect(throttle.admitKnownKey('192.0.2.1', 'key')).toBe(true);
    throttle.succeeded('192.0.2.3', 'key');
    expect(throttle.size).toBe(2);
    // .2 went (its guesses forgotten), .1 stayed (its key still passes however empty its bucket).
    expect(() => throttle.admit('192.0.2.2', 'guess')).not.toThrow();
    for (let i = 0; i < 3; i += 1) throttle.failed('192.0.2.1');
    expect(throttle.admitKnownKey('192.0.2.1', 'key')).toBe(true);
    expect(throttle.admitKnownKey('192.0.2.1', 'other')).toBe(false);
  });

  it('a busy client leaves no garbage in the old generation per request (it would bring full collections under load)', () => {
    let now = 0;
    const throttle = new AuthThrottle({ burst: 3, perMinute: 60, maxAddresses: 100, now: () => now });
    throttle.succeeded('127.0.0.1', 'key');
    // Two collections move the table into the old generation, where a long-running server's is.
    gc();
    gc();
    const before = oldSpaceUsed();
    // 100,000 authenticated requests over 10 s from one address (re-inserting the address into the
    // table on every request wrote ~150 bytes of old-generation garbage each).
    for (let i = 0; i < 100_000; i += 1) {
      now += 0.1;
      throttle.admit('127.0.0.1', 'key');
      throttle.succeeded('127.0.0.1', 'key');
    }
    expect(oldSpaceUsed() - before).toBeLessThan(1_000_000);
  });

  it('IPv6 addresses count per /64; IPv4-mapped addresses as IPv4', () => {
    expect(groupOf('2001:db8:1:2:aaaa::1')).toBe(groupOf('2001:db8:1:2::ffff'));
    expect(groupOf('2001:db8:1:3::1')).not.toBe(groupOf('2001:db8:1:2::1'));
    expect(groupOf('::ffff:127.0.0.2')).toBe('127.0.0.2');
  });
});

describe('BOOTSTRAP_API_KEY shorter than 24 characters', () => {
  it('refuses to start, saying why in one sentence', () => {
    const result = spawnSync(process.execPath, [join(ROOT, 'server/main.ts')], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: ':memory:', BOOTSTRAP_API_KEY: 'ab' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/BOOTSTRAP_API_KEY must be at least 24 characters long, because a shorter key can be guessed/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});
