/**
 * What every agent's command line reads alike: the control plane, the listener and its token (from
 * `--token` or `CONTROL_PLANE_AGENT_TOKEN`, which `ps` does not show), and numbers checked once at
 * the top. A missing one prints the usage and exits 2; `--help` prints it and exits 0.
 */
export function connectionOptions(
  values: { help?: boolean; url?: string; listener?: string; token?: string },
  env: NodeJS.ProcessEnv,
  usage: string,
): { url: string; listenerId: string; token: string } {
  const token = values.token ?? env.CONTROL_PLANE_AGENT_TOKEN;
  if (values.help || !values.url || !values.listener || !token) {
    process.stderr.write(`${usage}\n`);
    process.exit(values.help ? 0 : 2);
  }
  return { url: values.url, listenerId: values.listener, token };
}

/** `value` of the flag `--name` as a number ≥ `min` (a whole one with `integer`), or exit 2 saying so. */
export function numberOption(name: string, value: string, min: number, kind: 'integer' | 'number' = 'integer'): number {
  const n = Number(value);
  if (!(kind === 'integer' ? Number.isInteger(n) : Number.isFinite(n)) || n < min) {
    process.stderr.write(`--${name} must be ${kind === 'integer' ? 'an integer' : 'a number'} ≥ ${min}\n`);
    process.exit(2);
  }
  return n;
}
