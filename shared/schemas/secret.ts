import { z } from 'zod';
import { lazySchema } from './lazy.ts';

/** Secret names are C identifiers: they become environment variables in the container. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * What a read returns in place of a secret's value. Sending it back unchanged in a PATCH keeps the
 * stored value, so a client can read a deployment, change one secret and send the list back.
 */
export const MASKED_SECRET_VALUE = '********';

export const Secret = lazySchema(() =>
  z.strictObject({
    name: z.string().regex(SECRET_NAME, { message: 'Secret name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)' }),
    value: z.string(),
  }),
);
export type Secret = z.infer<typeof Secret>;

/** A list of secrets whose names are unique. */
export const SecretList = lazySchema(() =>
  z.array(Secret).superRefine((secrets, ctx) => {
    const seen = new Set<string>();
    secrets.forEach((secret, index) => {
      if (seen.has(secret.name)) {
        ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `Duplicate secret name '${secret.name}'` });
      }
      seen.add(secret.name);
    });
  }),
);
