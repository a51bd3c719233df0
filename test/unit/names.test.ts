import { describe, expect, it } from 'vitest';
import { dnsSafeName } from '../../server/domain/names.ts';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

describe('dnsSafeName', () => {
  it('keeps a name that is already a DNS label', () => {
    expect(dnsSafeName('my-agent')).toBe('my-agent');
    expect(dnsSafeName('1agent')).toBe('1agent');
  });

  it('folds case and underscores, and adds a hash so folded names never collide', () => {
    const names = ['my_agent', 'My-Agent', 'MY_AGENT', 'my-agent', 'agent-', 'a_', 'A'.repeat(63), `${'a'.repeat(62)}_`];
    const forms = names.map(dnsSafeName);
    for (const form of forms) {
      expect(form).toMatch(DNS_LABEL);
      expect(form.length).toBeLessThanOrEqual(63);
    }
    expect(new Set(forms).size).toBe(names.length);
    expect(dnsSafeName('my_agent')).toMatch(/^my-agent-[0-9a-f]{16}$/);
    expect(dnsSafeName('my_agent')).toBe(dnsSafeName('my_agent'));
  });
});
