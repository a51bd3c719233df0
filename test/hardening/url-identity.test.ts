import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCall } from '../helpers/agent-call.ts';
import { testBackendKind } from '../helpers/backends.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * A deployment is identified outside the API (its proxy route, its `custom_url` host) by the URL
 * form of its name, and distinct names have distinct URL forms: names that differ only in case,
 * and a name made to look like another's hashed form, never share a URL or a route, so deleting
 * one never touches the other.
 */

type App = Awaited<ReturnType<typeof inProcessApp>>;
const hashOf = (name: string, hex: number) => createHash('sha256').update(name).digest('hex').slice(0, hex);

describe(`deployment URL identity (${testBackendKind()})`, () => {
  let t: App;
  beforeAll(async () => {
    t = await inProcessApp();
  });
  afterAll(() => t.close());

  // The victim's name, the same in lower case, and names built to equal the victim's hashed form.
  const namesAround = (victim: string) => [
    victim,
    victim.toLowerCase(),
    `${victim.toLowerCase()}-${hashOf(victim, 6)}`,
    `${victim.toLowerCase()}-${hashOf(victim, 16)}`,
    victim.toLowerCase().replace('victim', 'victim_'),
  ];
  const victimName = () => `Victim${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`;

  it('gives every name its own custom_url host, and deleting one leaves the others as they were', async () => {
    const names = namesAround(victimName());
    const created: Array<{ id: string; name: string; source_config: { custom_url: string } }> = [];
    for (const name of names) {
      const answer = await t.api.post('/v2/deployments', { name, source: 'internal_source' });
      expect(answer.status, name).toBe(201);
      created.push(answer.body);
    }
    // The host's first label without its random 8-hex suffix: the part a name decides.
    const formOf = (url: string) => new URL(url).hostname.split('.')[0]!.replace(/-[0-9a-f]{8}$/, '');
    const forms = created.map((d) => formOf(d.source_config.custom_url));
    expect(new Set(forms).size, JSON.stringify(forms)).toBe(names.length);
    for (const d of created) expect(new URL(d.source_config.custom_url).hostname.split('.')[0]!.length).toBeLessThanOrEqual(63);

    expect((await t.api.delete(`/v2/deployments/${created[1]!.id}`)).status).toBe(204);
    const still = await t.api.get(`/v2/deployments/${created[0]!.id}`);
    expect(still.status).toBe(200);
    expect(still.body.source_config.custom_url).toBe(created[0]!.source_config.custom_url);
  });

  it('hands the agent a distinct URL form for each name to route by', async () => {
    const names = namesAround(victimName());
    const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('routes') });
    const token = (await t.api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
    for (const name of names) expect((await t.api.post('/v2/deployments', dockerBody(name, listener.body.id))).status, name).toBe(201);
    const routes = new Map<string, string>();
    for (;;) {
      const claim = await agentCall(t.app, listener.body.id, token, '/claim', { agent_id: 'router', wait_seconds: 0 });
      if (!claim.body.work) break;
      routes.set(claim.body.work.deployment.name, claim.body.work.deployment.url_name);
    }
    expect([...routes.keys()].sort()).toEqual([...names].sort());
    expect(new Set(routes.values()).size, JSON.stringify([...routes])).toBe(names.length);
    for (const form of routes.values()) expect(form).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  });
});
