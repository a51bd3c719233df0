/**
 * The environment that makes `git` send an installation token to one repository URL: an
 * `http.<url>.extraHeader` given through `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` /
 * `GIT_CONFIG_VALUE_n`. Unlike a token in the URL or a `-c` option, this shows on no command line
 * (`ps`), is written to no `.git/config`, and is sent only to URLs under `url` (git matches the
 * configured URL as a prefix), so a submodule or redirect elsewhere never receives it. Entries
 * already in `env` are kept: the new one is appended after them.
 */
export function gitTokenEnv(env: NodeJS.ProcessEnv, url: string, token: string): NodeJS.ProcessEnv {
  const count = Number.parseInt(env.GIT_CONFIG_COUNT ?? '0', 10);
  const index = Number.isInteger(count) && count >= 0 ? count : 0;
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return {
    ...env,
    GIT_CONFIG_COUNT: String(index + 1),
    [`GIT_CONFIG_KEY_${index}`]: `http.${url}.extraHeader`,
    [`GIT_CONFIG_VALUE_${index}`]: `Authorization: Basic ${basic}`,
  };
}
