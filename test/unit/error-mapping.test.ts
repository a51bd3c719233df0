import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import {
  BadRequest,
  Conflict,
  type DomainError,
  Forbidden,
  NotFound,
  PayloadTooLarge,
  StorageUnavailable,
  TooManyRequests,
  Unauthorized,
  Unavailable,
  UnsupportedMediaType,
  ValidationFailed,
} from '../../server/domain/errors.ts';
import { errorResponse, statusOf } from '../../server/http/errors.ts';
import { silentLogger } from '../../server/logger.ts';

/** Throws `error` from a route and answers it through the one error mapping, as `createApp` does. */
async function answerTo(error: DomainError): Promise<Response> {
  const app = new Hono();
  app.onError((thrown, c) => errorResponse(thrown, c, { log: silentLogger }));
  app.get('/', () => {
    throw error;
  });
  return app.request('/');
}

describe('the error mapping', () => {
  const cases: Array<[DomainError, number]> = [
    [new BadRequest('b'), 400],
    [new Unauthorized('u'), 401],
    [new Forbidden('f'), 403],
    [new NotFound('n'), 404],
    [new Conflict('c'), 409],
    [new PayloadTooLarge('p'), 413],
    [new UnsupportedMediaType('m'), 415],
    [new ValidationFailed([{ type: 'missing', loc: ['body', 'name'], msg: 'Field required' }]), 422],
    [new TooManyRequests('t', 7), 429],
    [new Unavailable('a', { retryAfterSeconds: 5 }), 503],
    [new StorageUnavailable('s'), 503],
  ];

  it.each(cases)('answers %s with its status and the contract body', async (error, status) => {
    const answer = await answerTo(error);
    expect(answer.status).toBe(status);
    const body = (await answer.json()) as { detail: unknown };
    expect(body.detail).toEqual(error instanceof ValidationFailed ? error.issues : error.message);
  });

  it('says when to retry for 429 and 503', async () => {
    expect((await answerTo(new TooManyRequests('t', 7))).headers.get('retry-after')).toBe('7');
    expect((await answerTo(new Unavailable('a', { retryAfterSeconds: 5 }))).headers.get('retry-after')).toBe('5');
  });

  it('maps every kind, and only the kinds there are', () => {
    // Each class names its own kind (a subclass, StorageUnavailable, overrides its parent's).
    expect(cases.map(([error]) => error.kind)).toEqual([
      'BadRequest',
      'Unauthorized',
      'Forbidden',
      'NotFound',
      'Conflict',
      'PayloadTooLarge',
      'UnsupportedMediaType',
      'ValidationFailed',
      'TooManyRequests',
      'Unavailable',
      'StorageUnavailable',
    ]);
    for (const [error, status] of cases) expect(statusOf(error.kind)).toBe(status);
    // @ts-expect-error a kind that is not in DomainErrorKind does not compile
    expect(() => statusOf('Gone')).toThrow(/No status code/);
  });
});
