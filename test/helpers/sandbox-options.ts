import type { SandboxOptions } from '../../agent/sandbox-setup.ts';

/**
 * What the sandbox's setup is given in tests that only look at the commands and binds it makes:
 * bwrap at Debian's path, no sandbox user, no network, no limits, no environment.
 */
export function bwrapSetupOptions(workDir: string): SandboxOptions {
  return {
    workDir,
    sandbox: 'bwrap',
    bwrapPath: '/usr/bin/bwrap',
    sandboxUser: null,
    egress: { mode: 'none', allow: [] },
    pastaPath: null,
    limits: null,
    env: {},
    passEnv: [],
  };
}
