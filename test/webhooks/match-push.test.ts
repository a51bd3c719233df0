import { describe, expect, it } from 'vitest';
import { deploymentSkip, type PushPayload, pushFacts, pushWideSkip, trackedBranch } from '../../server/domain/webhooks/match-push.ts';
import type { DeploymentRecord, IntegrationRecord } from '../../server/store/types.ts';
import { pushPayload } from './github.ts';

const facts = (options: Parameters<typeof pushPayload>[0]) => pushFacts(pushPayload(options) as unknown as PushPayload)!;

function deployment(overrides: { build_on_push?: boolean; repo_ref?: string; status?: string } = {}): DeploymentRecord {
  return {
    id: crypto.randomUUID(),
    tenant_id: 'ws',
    name: 'agent',
    source: 'github',
    source_config: {
      integration_id: 'int-1',
      repo_url: 'https://github.com/acme/agent',
      build_on_push: overrides.build_on_push ?? true,
    } as DeploymentRecord['source_config'],
    source_revision_config: {
      repo_ref: overrides.repo_ref ?? 'main',
      graph_config_path: 'langgraph.json',
      image_uri: null,
      repo_commit_sha: null,
      langgraph_config_path: null,
      source_tarball_path: null,
    },
    secrets: [],
    created_at: '',
    updated_at: '',
    status: (overrides.status ?? 'READY') as DeploymentRecord['status'],
    latest_revision_id: null,
    active_revision_id: null,
    image_version: null,
    delete_tracing_project: false,
  };
}
const integration = (overrides: Partial<IntegrationRecord> = {}): IntegrationRecord => ({
  id: 'int-1',
  tenant_id: 'ws',
  installation_id: 7,
  name: 'acme',
  suspended: false,
  created_at: '',
  ...overrides,
});

describe('matching a push', () => {
  it('reads every URL form GitHub sends as one normalised repository', () => {
    expect(facts({ repo: 'Acme/Agent' }).repoKeys).toEqual(['github.com/acme/agent']);
  });

  it('rules out deletions (flag or all-zero after), tags, non-branch refs and skip markers for the whole push', () => {
    expect(pushWideSkip(facts({ repo: 'a/b', deleted: true }))).toMatch(/deleted/);
    expect(pushWideSkip(pushFacts({ ...pushPayload({ repo: 'a/b' }), after: '0'.repeat(40) } as unknown as PushPayload)!)).toMatch(/deleted/);
    expect(pushWideSkip(facts({ repo: 'a/b', ref: 'refs/tags/main' }))).toMatch(/tag/);
    expect(pushWideSkip(facts({ repo: 'a/b', ref: 'refs/pull/1/head' }))).toMatch(/not a branch/);
    expect(pushWideSkip(facts({ repo: 'a/b', message: 'x\n\n[Skip CI] please' }))).toMatch(/\[Skip CI\]/);
    expect(pushWideSkip(facts({ repo: 'a/b', message: 'skip ci without brackets' }))).toBeNull();
  });

  it('matches the branch exactly, in either repo_ref form, and never a tag', () => {
    expect(trackedBranch('main')).toBe('main');
    expect(trackedBranch('refs/heads/main')).toBe('main');
    expect(trackedBranch('refs/tags/v1')).toBeNull();
    const push = facts({ repo: 'acme/agent', installationId: 7 });
    expect(deploymentSkip(deployment(), integration(), push)).toBeNull();
    expect(deploymentSkip(deployment({ repo_ref: 'refs/heads/main' }), integration(), push)).toBeNull();
    expect(deploymentSkip(deployment({ repo_ref: 'mai' }), integration(), push)).toMatch(/tracks branch mai/);
    expect(deploymentSkip(deployment({ repo_ref: 'main/x' }), integration(), push)).toMatch(/tracks branch/);
  });

  it('checks build_on_push, deletion, installation scoping and the integration', () => {
    const push = facts({ repo: 'acme/agent', installationId: 7 });
    expect(deploymentSkip(deployment({ build_on_push: false }), integration(), push)).toMatch(/build_on_push is false/);
    expect(deploymentSkip(deployment({ status: 'AWAITING_DELETE' }), integration(), push)).toMatch(/being deleted/);
    expect(deploymentSkip(deployment(), integration({ installation_id: 8 }), push)).toMatch(/installation 8; the delivery came from installation 7/);
    expect(deploymentSkip(deployment(), integration({ suspended: true }), push)).toMatch(/suspended/);
    expect(deploymentSkip(deployment(), null, push)).toMatch(/no longer exists/);
    expect(deploymentSkip(deployment(), integration({ tenant_id: 'other' }), push)).toMatch(/no longer exists/);
    // A repository webhook names no installation: any linked, unsuspended integration may build.
    expect(deploymentSkip(deployment(), integration({ installation_id: 8 }), facts({ repo: 'acme/agent' }))).toBeNull();
  });

  it('refuses a payload without the fields matching needs', () => {
    expect(pushFacts({ ref: 'refs/heads/main' } as unknown as PushPayload)).toBeNull();
  });
});

describe('repository URL normalisation', () => {
  it('compares the https, scp, ssh (with or without a port) forms as one repository', async () => {
    const { normalizeRepoUrl } = await import('../../shared/repo-url.ts');
    const forms = [
      'https://github.com/Acme/Agent.git',
      'https://github.com/acme/agent/',
      'git@github.com:acme/agent.git',
      'ssh://git@github.com/acme/agent',
      'ssh://git@github.com:22/acme/agent.git',
    ];
    expect(new Set(forms.map(normalizeRepoUrl))).toEqual(new Set(['github.com/acme/agent']));
    expect(normalizeRepoUrl('https://github.com/acme/other')).not.toBe('github.com/acme/agent');
  });
});
