import { createHmac, randomBytes } from 'node:crypto';
import { hashApiKey, sameDigest } from '../crypto/api-key.ts';
import type { AuditLog } from '../domain/audit.ts';
import type { Auth, Principal } from '../domain/auth.ts';
import { NotFound } from '../domain/errors.ts';
import type { Clock } from '../lib/clock.ts';
import { requestScope } from '../lib/request-scope.ts';
import type { ConsoleStore } from '../store/console.ts';

/** The longest a console session lasts (contract section 16: at most 12 h), whatever it is used for meanwhile. */
export const SESSION_MAX_SECONDS = 12 * 60 * 60;

/** A signed-in browser: the principal its key gives, and the token its cookie holds (for CSRF tokens and sign-out). */
export type ConsoleSession = { principal: Principal; token: string; expiresAt: string };

/** Where a sign-in or sign-out comes from, for the audit log. */
export type ConsoleClient = { address: string | undefined; userAgent: string | undefined };

/**
 * The console's sessions. Signing in exchanges an API key (checked exactly as the API checks it,
 * throttle included) for a random session token: the browser keeps only the token, in an HttpOnly
 * cookie; the database keeps only its SHA-256, with the key's id, so revoking the key ends the
 * session on its next request. The CSRF token of a session is an HMAC of its token: nothing more
 * to store, and a page of another origin can neither read the cookie nor compute it.
 */
export class ConsoleSessions {
  readonly #auth: Auth;
  readonly #store: ConsoleStore;
  readonly #clock: Clock;
  readonly #ttlSeconds: number;
  readonly #audit: Pick<AuditLog, 'recordSignIn'> | undefined;

  constructor(deps: { auth: Auth; store: ConsoleStore; clock: Clock; ttlSeconds: number; audit?: Pick<AuditLog, 'recordSignIn'> }) {
    this.#audit = deps.audit;
    this.#auth = deps.auth;
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#ttlSeconds = Math.min(deps.ttlSeconds, SESSION_MAX_SECONDS);
  }

  /**
   * Signs in with `key` (throws `Unauthorized` for a wrong, revoked or expired key). The one
   * place a session starts, so the one place sign-ins are audited (a refused key names no
   * organization to record it under: the key check's throttle and log see those).
   */
  async signIn(key: string, client: ConsoleClient): Promise<ConsoleSession> {
    const principal = await this.#auth.authenticate(key.trim(), undefined, client.address);
    const token = randomBytes(32).toString('base64url');
    const now = this.#clock.now();
    const expiresAt = new Date(Date.parse(now) + this.#ttlSeconds * 1000).toISOString();
    await this.#store.createSession({ tokenHash: hashApiKey(token), keyId: principal.keyId, workspaceId: principal.workspaceId, createdAt: now, expiresAt });
    await this.#recordAudit('sign_in', principal, client);
    return { principal, token, expiresAt };
  }

  /** Ends `session` on request: the one place a session ends so, and the one place sign-outs are audited. */
  async signOut(session: ConsoleSession, client: ConsoleClient): Promise<void> {
    await this.#store.deleteSession(hashApiKey(session.token));
    await this.#recordAudit('sign_out', session.principal, client);
  }

  #recordAudit(action: 'sign_in' | 'sign_out', principal: Principal, client: ConsoleClient): Promise<void> {
    if (!this.#audit) return Promise.resolve();
    return this.#audit.recordSignIn({
      action,
      organizationId: principal.organizationId,
      workspaceId: principal.workspaceId,
      keyId: principal.keyId,
      organizationScoped: principal.organizationScoped,
      address: client.address ?? null,
      userAgent: client.userAgent ?? null,
      succeeded: true,
      requestId: requestScope()?.requestId ?? null,
    });
  }

  /** The live session of a cookie's token, or null (none, ended, expired, or its key revoked or expired). */
  async resolve(token: string | undefined): Promise<ConsoleSession | null> {
    if (!token) return null;
    const found = await this.#store.findSession(hashApiKey(token), this.#clock.now());
    if (!found) return null;
    const principal: Principal = {
      keyId: found.keyId,
      organizationId: found.organizationId,
      workspaceId: found.workspaceId,
      organizationScoped: found.organizationScoped,
    };
    return { principal, token, expiresAt: found.expiresAt };
  }

  /** Makes `workspaceId` the session's workspace, when the session's key may use it (404 otherwise, as the API answers). */
  async chooseWorkspace(session: ConsoleSession, workspaceId: string): Promise<void> {
    const workspaces = await this.#auth.listWorkspaces(session.principal);
    if (!workspaces.some((workspace) => workspace.id === workspaceId)) throw new NotFound(`Workspace ID ${workspaceId} not found.`);
    await this.#store.setSessionWorkspace(hashApiKey(session.token), workspaceId);
  }

  /** The CSRF token every state-changing form of this session carries. */
  csrfToken(session: ConsoleSession): string {
    return csrfOf(session.token);
  }

  /** Whether `presented` is this session's CSRF token (compared in constant time). */
  csrfMatches(session: ConsoleSession, presented: string | undefined): boolean {
    if (!presented || !/^[0-9a-f]{64}$/.test(presented)) return false;
    return sameDigest(csrfOf(session.token), presented);
  }

  /** Forgets ended sessions (their rows are useless once expired). */
  sweep(): Promise<number> {
    return this.#store.deleteExpiredSessions(this.#clock.now());
  }
}

function csrfOf(token: string): string {
  return createHmac('sha256', token).update('console-csrf').digest('hex');
}
