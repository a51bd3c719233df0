/**
 * What each listener token is doing in this process: the claim long-polls waiting with it and the
 * claims it was handed. A revoke ends both at once: the polls answer 401 instead of work, and the
 * claims go back to the queue for another agent rather than waiting out their lease. Every process
 * keeps its own (the revoke reaches the others as an acknowledged notice); what survives no process
 * (a claim of a process that died) still ends by its lease, and a revoked token cannot renew it.
 */
export class TokenSessions {
  /** Token id → the aborts of its waiting polls here. */
  readonly #polls = new Map<string, Set<AbortController>>();
  /** Claim id → the token that took it and its listener, for the claims handed out here and not yet ended. */
  readonly #claims = new Map<string, { tokenId: string; listenerId: string }>();
  /**
   * Tokens revoked while this process ran: a poll that claims work as the revoke lands gives it
   * back. Bounded by the revokes themselves; the store's own check covers a token revoked earlier.
   */
  readonly #revoked = new Set<string>();

  /** A poll waiting with `tokenId`: its signal fires when the token is revoked; `done()` when it answers. */
  poll(tokenId: string): { signal: AbortSignal; done: () => void } {
    const abort = new AbortController();
    if (this.#revoked.has(tokenId)) abort.abort();
    let set = this.#polls.get(tokenId);
    if (!set) this.#polls.set(tokenId, (set = new Set()));
    set.add(abort);
    return {
      signal: abort.signal,
      done: () => {
        set.delete(abort);
        if (set.size === 0 && this.#polls.get(tokenId) === set) this.#polls.delete(tokenId);
      },
    };
  }

  isRevoked(tokenId: string): boolean {
    return this.#revoked.has(tokenId);
  }

  /** A claim was handed to an agent with `tokenId`. */
  claimed(claimId: string, tokenId: string, listenerId: string): void {
    this.#claims.set(claimId, { tokenId, listenerId });
  }

  /** The claim ended (released, its revision ended, its teardown done): nothing to give back on a revoke. */
  ended(claimId: string): void {
    this.#claims.delete(claimId);
  }

  /** Ends the token's waiting polls here; answers the claims it holds here, forgotten, for the caller to release. */
  revoke(tokenId: string): Array<{ claimId: string; listenerId: string }> {
    this.#revoked.add(tokenId);
    for (const abort of this.#polls.get(tokenId) ?? []) abort.abort();
    this.#polls.delete(tokenId);
    const held: Array<{ claimId: string; listenerId: string }> = [];
    for (const [claimId, claim] of this.#claims) {
      if (claim.tokenId !== tokenId) continue;
      held.push({ claimId, listenerId: claim.listenerId });
      this.#claims.delete(claimId);
    }
    return held;
  }
}
