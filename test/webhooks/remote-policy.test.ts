import { describe, expect, it } from 'vitest';
import { reconcileTarget } from '../../server/git/remote-policy.ts';

const policy = { allowedHosts: ['github.com', 'git.example.com:8443'], allowFileUrls: false };

describe('which repository URLs the reconciler reads, and how', () => {
  it('reads https URLs of allowed hosts, on their https port or the port listed', () => {
    expect(reconcileTarget('https://github.com/acme/app.git', policy)).toEqual({ ok: true, url: 'https://github.com/acme/app.git', file: false });
    expect(reconcileTarget('https://GitHub.com:443/acme/app', policy)).toMatchObject({ ok: true, url: 'https://github.com/acme/app' });
    expect(reconcileTarget('https://git.example.com:8443/acme/app', policy)).toMatchObject({ ok: true });
  });

  it('reads ssh URLs over https from the same host (it has no SSH identity)', () => {
    expect(reconcileTarget('git@github.com:acme/app.git', policy)).toMatchObject({ ok: true, url: 'https://github.com/acme/app.git' });
    expect(reconcileTarget('ssh://git@github.com:22/acme/app.git', policy)).toMatchObject({ ok: true, url: 'https://github.com/acme/app.git' });
  });

  it.each([
    ['another host', 'https://gitlab.com/acme/app'],
    ['a loopback address', 'https://127.0.0.1/acme/app'],
    ['an allowed host on another port', 'https://github.com:8080/acme/app'],
    ['a listed host:port on its default port', 'https://git.example.com/acme/app'],
    ['a metadata address in ssh form', 'git@169.254.169.254:latest/meta-data'],
    ['a look-alike host', 'https://github.com.evil.example/acme/app'],
    ['credentials', 'https://x:y@github.com/acme/app'],
    ['plain http', 'http://github.com/acme/app'],
    ['the git protocol', 'git://github.com/acme/app'],
    ['ext::', 'ext::sh -c touch% /tmp/pwned'],
    ['file:// without ALLOW_FILE_REPO_URLS', 'file:///srv/repo.git'],
  ])('refuses %s', (_label, url) => {
    expect(reconcileTarget(url, policy)).toMatchObject({ ok: false, reason: expect.any(String) });
  });

  it('reads file:// only when the server allows it', () => {
    expect(reconcileTarget('file:///srv/repo.git', { ...policy, allowFileUrls: true })).toEqual({ ok: true, url: 'file:///srv/repo.git', file: true });
  });
});
