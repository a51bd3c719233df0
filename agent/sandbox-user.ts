import { execFileSync } from 'node:child_process';
import { chownSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/** The host user every sandbox runs as (docs/decisions/local-agent-sandbox-user.md). */
export type SandboxUser = { name: string; uid: number; gid: number };

/** The user the agent makes for its sandboxes when it runs as root and none is named. */
export const DEFAULT_SANDBOX_USER = 'cp-sandbox';

/** The agent may not run sandboxes as this user: says why. */
export class SandboxUserUnavailable extends Error {
  override readonly name = 'SandboxUserUnavailable';
}

function lookUp(nameOrUid: string): SandboxUser | null {
  const byUid = /^\d+$/.test(nameOrUid);
  for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const [name, , uid, gid] = line.split(':');
    if (!name || uid === undefined || gid === undefined) continue;
    if (byUid ? uid === nameOrUid : name === nameOrUid) return { name, uid: Number(uid), gid: Number(gid) };
  }
  // A bare uid with no passwd entry is fine: its group is the same number.
  return byUid ? { name: nameOrUid, uid: Number(nameOrUid), gid: Number(nameOrUid) } : null;
}

/**
 * Who the sandboxes run as. Not root: the agent's own user (nothing else is possible without
 * privileges, and it is not the host's root). Root: `requested` (a name or uid), or the dedicated
 * `cp-sandbox` user, made now (a system user without a home or a shell) if it does not exist,
 * or `nobody` where users cannot be made. Never uid 0: the sandbox's root would be the host's.
 */
export function sandboxUser(requested: string | undefined, agentUid = process.getuid?.() ?? 0): SandboxUser | null {
  if (agentUid !== 0) {
    if (requested !== undefined)
      throw new SandboxUserUnavailable(`--sandbox-user needs the agent to run as root (it runs as uid ${agentUid}; its sandboxes run as that uid).`);
    return null;
  }
  if (requested !== undefined) {
    const user = lookUp(requested);
    if (!user) throw new SandboxUserUnavailable(`--sandbox-user ${requested}: no such user on this machine.`);
    if (user.uid === 0 || user.gid === 0) throw new SandboxUserUnavailable(`--sandbox-user ${requested}: the sandbox may not run as root (uid or gid 0).`);
    return user;
  }
  const existing = lookUp(DEFAULT_SANDBOX_USER);
  if (existing) return existing;
  try {
    execFileSync(
      'useradd',
      ['--system', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', '--user-group', DEFAULT_SANDBOX_USER],
      {
        stdio: 'pipe',
      },
    );
  } catch {
    // useradd missing or refused (a read-only /etc): nobody is the unprivileged user every system has.
  }
  const made = lookUp(DEFAULT_SANDBOX_USER) ?? lookUp('nobody');
  if (!made || made.uid === 0) throw new SandboxUserUnavailable('No unprivileged user for the sandboxes: name one with --sandbox-user.');
  return made;
}

/**
 * Gives `paths` (recursively, links not followed) to the sandbox user: what a sandbox writes
 * (its checkout, its state folder, its cache) is owned by it, so it can write there and nowhere
 * else. Nothing to do when the sandboxes run as the agent's own user.
 */
export function giveTo(user: SandboxUser | null, ...paths: string[]): void {
  if (!user || paths.length === 0) return;
  execFileSync('chown', ['-R', '--no-dereference', `${user.uid}:${user.gid}`, ...paths], { stdio: 'pipe' });
}

/** Gives one folder (not its contents) to the sandbox user. */
export function giveFolderTo(user: SandboxUser | null, path: string): void {
  if (user) chownSync(path, user.uid, user.gid);
}

/**
 * The first folder above `workDir` that `user` may not pass through, or null when it may reach
 * `workDir`. bwrap runs as the sandbox user and opens the folders it binds by their paths, so
 * every folder on the way must let that user search it: a work directory under `/root` (0700)
 * or under a `mkdtemp` folder would make every build fail with bwrap's "Permission denied".
 * Only the mode bits are read (an ACL that grants more is not seen: the check errs on refusing).
 */
export function folderBarringUser(workDir: string, user: SandboxUser): string | null {
  let folder = dirname(realpathSync(workDir));
  for (;;) {
    const { mode, uid, gid } = statSync(folder);
    const searchBit = uid === user.uid ? 0o100 : gid === user.gid ? 0o010 : 0o001;
    if ((mode & searchBit) === 0) return folder;
    const parent = dirname(folder);
    if (parent === folder) return null;
    folder = parent;
  }
}
