import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ACTION_INPUTS, readInputs, workflowRef } from '../../action/inputs.ts';
import { patchBody } from '../../shared/deploy/apply.ts';
import { type DeployInput, InputError, parseDeployOptions, parseDuration, parseResourceSpec, parseSecrets } from '../../shared/deploy/options.ts';
import { ROOT } from './harness.ts';

const base: Record<string, string> = { 'api-url': 'https://deploy.example.com', 'api-key': 'k' };
const options = (inputs: Record<string, string>, defaults: { repoRef?: string } = {}) =>
  parseDeployOptions((name: DeployInput) => ({ ...base, ...inputs })[name], defaults);

describe('deploy inputs', () => {
  it('parses durations in s, m, h, ms and bare seconds, and names the input when it cannot', () => {
    expect(parseDuration('90s', 'x')).toBe(90_000);
    expect(parseDuration('30m', 'x')).toBe(1_800_000);
    expect(parseDuration('1h', 'x')).toBe(3_600_000);
    expect(parseDuration('1h30m', 'x')).toBe(5_400_000);
    expect(parseDuration('250ms', 'x')).toBe(250);
    expect(parseDuration('45', 'x')).toBe(45_000);
    expect(() => parseDuration('30 minutes', 'wait-timeout')).toThrow(/Input wait-timeout must be a duration/);
    expect(() => parseDuration('1h-5m', 'wait-timeout')).toThrow(InputError);
  });

  it('reads secrets as NAME=value lines, keeping = in values, and never echoes a value in an error', () => {
    expect(parseSecrets('A=1\n\n# comment\r\nB_2=x=y z\n')).toEqual([
      { name: 'A', value: '1' },
      { name: 'B_2', value: 'x=y z' },
    ]);
    expect(() => parseSecrets('A=1\nA=2')).toThrow(/the secret A is given twice/);
    expect(() => parseSecrets('9X=top-secret')).toThrow(/'9X' must be a C identifier/);
    try {
      parseSecrets('no-equals-sign-top-secret');
    } catch (error) {
      expect((error as Error).message).not.toContain('top-secret');
    }
  });

  it('reads a resource spec as YAML or JSON and checks it with the API schema', () => {
    expect(parseResourceSpec('min_scale: 1\nmax_scale: 3\ncpu: 2')).toEqual({ min_scale: 1, max_scale: 3, cpu: 2 });
    expect(parseResourceSpec('{"memory_mb": 512}')).toEqual({ memory_mb: 512 });
    expect(() => parseResourceSpec('min_scale: [')).toThrow(/Input resource-spec is neither JSON nor YAML/);
    expect(() => parseResourceSpec('bogus: 1')).toThrow(/Input resource-spec/);
  });

  it('infers the source, and refuses inputs of two sources or of the other source', () => {
    expect(options({ name: 'a', 'image-uri': 'img' }).source).toBe('external_docker');
    expect(options({ name: 'a', 'repo-url': 'https://github.com/a/b', 'graph-config-path': 'g.json' }, { repoRef: 'main' }).source).toBe('github');
    expect(() => options({ name: 'a', source: 'github', 'image-uri': 'img' })).toThrow(
      'Input image-uri applies to source external_docker, but source is github.',
    );
    expect(() => options({ name: 'a', source: 'external_docker', 'image-uri': 'i', 'build-on-push': 'true' })).toThrow(
      'Input build-on-push applies to source github, but source is external_docker.',
    );
  });

  it('requires what a create needs when the deployment is given by name, but not by id', () => {
    expect(() => options({ name: 'a', 'repo-url': 'https://github.com/a/b', 'graph-config-path': 'g.json' })).toThrow(/Input repo-ref is required/);
    expect(options({ name: 'a', 'repo-url': 'https://github.com/a/b', 'graph-config-path': 'g.json' }, { repoRef: 'dev' }).defaultRepoRef).toBe('dev');
    const byId = options({ 'deployment-id': crypto.randomUUID(), secrets: 'A=1' });
    expect(byId.source).toBeUndefined();
    expect(patchBody('external_docker', byId)).toEqual({ secrets: [{ name: 'A', value: '1' }] });
    expect(patchBody('github', { ...byId, secrets: undefined, defaultRepoRef: 'main' })).toEqual({ source_revision_config: { repo_ref: 'main' } });
    expect(patchBody('external_docker', { ...byId, secrets: undefined, defaultRepoRef: 'main' })).toBeNull();
  });

  it('checks formats and conflicts with a sentence naming the input', () => {
    expect(() => options({ name: 'Bad Name', 'image-uri': 'i' })).toThrow(/Input name must be/);
    expect(() => options({ 'deployment-id': 'nope' })).toThrow(/Input deployment-id must be a deployment id/);
    expect(() => options({ name: 'a', 'image-uri': 'i', 'api-url': 'ftp://x' })).toThrow(/Input api-url must be an http\(s\) URL/);
    expect(() => options({ name: 'a', 'image-uri': 'i', 'api-key': '' })).toThrow(/Input api-key is required/);
    expect(() => options({ name: 'a', 'image-uri': 'i', wait: 'yes' })).toThrow(/Input wait must be true or false/);
    expect(() =>
      options({ name: 'a', 'repo-url': 'https://github.com/a/b', 'graph-config-path': 'g', 'repo-ref': 'refs/tags/v1', 'build-on-push': 'true' }),
    ).toThrow(/Input build-on-push cannot be true when repo-ref is a tag/);
    expect(() => options({ name: 'a', 'image-uri': 'i', 'deployment-type': 'prod' })).toThrow(/deployment-type .*source github/);
  });

  it('defaults repo-ref to the workflow branch: the PR head, a tag as refs/tags/, else the branch', () => {
    expect(workflowRef({ GITHUB_REF_NAME: 'main', GITHUB_REF_TYPE: 'branch' })).toBe('main');
    expect(workflowRef({ GITHUB_REF_NAME: 'v1.2', GITHUB_REF_TYPE: 'tag' })).toBe('refs/tags/v1.2');
    expect(workflowRef({ GITHUB_REF_NAME: '12/merge', GITHUB_HEAD_REF: 'feature', GITHUB_REF_TYPE: 'branch' })).toBe('feature');
    expect(workflowRef({})).toBeUndefined();
  });

  it('needs a token and a workflow run for github-deployment', () => {
    const get = (inputs: Record<string, string>) => (name: string) => ({ ...base, name: 'a', 'image-uri': 'i', ...inputs })[name] ?? '';
    expect(() => readInputs(get({ 'github-deployment': 'true' }), { GITHUB_REPOSITORY: 'a/b', GITHUB_SHA: 'abc' })).toThrow(/Input github-token is required/);
    const inputs = readInputs(get({ 'github-deployment': 'true', 'github-token': 't' }), { GITHUB_REPOSITORY: 'a/b', GITHUB_SHA: 'abc', GITHUB_RUN_ID: '7' });
    expect(inputs.githubDeployment).toMatchObject({ owner: 'a', repo: 'b', ref: 'abc', environment: 'a', runUrl: 'https://github.com/a/b/actions/runs/7' });
    expect(readInputs(get({}), {}).githubDeployment).toBeNull();
  });

  it('action.yml declares exactly the inputs the Action reads, and the four outputs', () => {
    const spec = parse(readFileSync(join(ROOT, 'action.yml'), 'utf8'));
    expect(Object.keys(spec.inputs).sort()).toEqual([...ACTION_INPUTS].sort());
    expect(Object.keys(spec.outputs).sort()).toEqual(['deployment-id', 'revision-id', 'status', 'url']);
    expect(spec.runs).toEqual({ using: 'node24', main: 'action/dist/index.js' });
  });
});
