import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Config } from '../../server/config.ts';
import { ROOT } from '../helpers/listening-child.ts';

// The operator's examples (docs/examples/) cannot be run here (no Docker, no Kubernetes): this
// checks what can drift without it. Every setting they give must be a real setting of
// server/config.ts, and the settings of a replica must pass the server's own schema.

const SETTINGS = new Set(Object.keys(Config.shape));
/** The longest `Prefer: wait=` a long-poll is held (contract §5): a proxy must wait longer than this. */
const LONG_POLL_MAX_SECONDS = 60;

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** What `docker compose` does with `${X:?…}`, `${X:-default}`, `${X}` and `$$` in the file. */
function interpolate(text: string, env: Record<string, string>): string {
  return text
    .replace(/\$\{([A-Z0-9_]+)(?::?[?-]([^}]*))?\}/g, (whole, name: string, fallback: string | undefined) => {
      if (env[name] !== undefined) return env[name]!;
      if (whole.includes(':?')) throw new Error(`compose needs ${name}: ${fallback}`);
      return fallback ?? '';
    })
    .replaceAll('$$', '$');
}

function checkSettings(where: string, env: Record<string, string>) {
  const unknown = Object.keys(env).filter((name) => !SETTINGS.has(name));
  expect(unknown, `${where} sets what server/config.ts does not know`).toEqual([]);
  const parsed = Config.safeParse(env);
  expect(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`), `${where}: refused by the config schema`).toEqual([]);
  expect(env.DATABASE_URL).toMatch(/^postgres(ql)?:\/\//);
  expect(env.HOST).toBe('0.0.0.0');
}

describe('docs/examples: three replicas on one PostgreSQL', () => {
  it('compose.yaml: three replicas with the same valid settings, PostgreSQL, and a proxy that outwaits a long-poll', () => {
    // A sample .env, as the file's header asks for.
    const dotEnv = {
      POSTGRES_PASSWORD: 'a-password',
      ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      BOOTSTRAP_API_KEY: 'x'.repeat(48),
      GITHUB_WEBHOOK_SECRET: 'hook-secret',
      PUBLIC_URL: 'https://control-plane.example.com',
    };
    const compose = parse(interpolate(read('docs/examples/compose.yaml'), dotEnv), { merge: true, maxAliasCount: 100 });
    const replicas = Object.entries(compose.services as Record<string, { environment?: Record<string, string> }>).filter(
      ([, s]) => s.environment?.DATABASE_URL,
    );
    expect(replicas.map(([name]) => name)).toEqual(['control-plane-1', 'control-plane-2', 'control-plane-3']);
    for (const [name, service] of replicas) {
      const env = Object.fromEntries(Object.entries(service.environment!).map(([k, v]) => [k, String(v)]));
      checkSettings(`compose service ${name}`, env);
      expect(env).toEqual(replicas[0]![1].environment);
    }
    const db = new URL(replicas[0]![1].environment!.DATABASE_URL!);
    expect(db.hostname).toBe('postgres');
    expect(compose.services.postgres.environment.POSTGRES_PASSWORD).toBe(dotEnv.POSTGRES_PASSWORD);
    expect(decodeURIComponent(db.password)).toBe(dotEnv.POSTGRES_PASSWORD);

    const nginx = compose.configs.nginx.content as string;
    for (const name of ['control-plane-1', 'control-plane-2', 'control-plane-3']) expect(nginx).toContain(`server ${name}:8080`);
    expect(Number(/proxy_read_timeout\s+(\d+)s;/.exec(nginx)?.[1])).toBeGreaterThan(LONG_POLL_MAX_SECONDS);
    expect(Number(/client_max_body_size\s+(\d+)m;/.exec(nginx)?.[1])).toBeGreaterThanOrEqual(200);
    expect(nginx).toContain('proxy_set_header Host $host;');
  });

  it('kubernetes.yaml: a Deployment of 3 with valid settings from a Secret, probes on the health port, a grace period', () => {
    const docs = parseAllDocuments(read('docs/examples/kubernetes.yaml')).map((d) => {
      expect(d.errors).toEqual([]);
      return d.toJS();
    });
    const byKind = (kind: string) => docs.find((d) => d.kind === kind);
    const secret = byKind('Secret').stringData as Record<string, string>;
    const deployment = byKind('Deployment');
    expect(deployment.spec.replicas).toBe(3);
    const pod = deployment.spec.template.spec;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(10);
    const [container] = pod.containers;
    const env: Record<string, string> = {};
    for (const entry of container.env as Array<{ name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }>) {
      if (entry.valueFrom) {
        expect(entry.valueFrom.secretKeyRef.name).toBe(byKind('Secret').metadata.name);
        expect(Object.keys(secret), `the Secret has no key ${entry.valueFrom.secretKeyRef.key}`).toContain(entry.valueFrom.secretKeyRef.key);
        env[entry.name] = secret[entry.valueFrom.secretKeyRef.key]!;
      } else env[entry.name] = String(entry.value);
    }
    // The placeholder key is not base64 of 32 bytes; the server checks that at start, not the schema.
    checkSettings('kubernetes Deployment', env);
    for (const name of ['DATABASE_URL', 'ENCRYPTION_KEY', 'BOOTSTRAP_API_KEY'])
      expect(container.env.find((e: { name: string }) => e.name === name).valueFrom, `${name} comes from the Secret`).toBeDefined();

    const ports = Object.fromEntries((container.ports as Array<{ name: string; containerPort: number }>).map((p) => [p.name, p.containerPort]));
    expect(ports.http).toBe(Number(env.PORT));
    expect(ports.health).toBe(Number(env.HEALTH_PORT));
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    const service = byKind('Service');
    expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
    const annotations = byKind('Ingress').metadata.annotations as Record<string, string>;
    expect(Number(annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'])).toBeGreaterThan(LONG_POLL_MAX_SECONDS);
  });

  it('docs/multi-process.md names only real settings, and the README links it', () => {
    const page = read('docs/multi-process.md');
    const named = [...page.matchAll(/^\| `([A-Z][A-Z0-9_]+)`/gm)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter((name) => !SETTINGS.has(name))).toEqual([]);
    // Settings named anywhere in the text (`AUTH_FAILURE_BURST`, …), wildcards (`UPLOAD_*`) aside.
    const mentioned = [...page.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`/g)].map((m) => m[1]!);
    expect(mentioned.filter((name) => !SETTINGS.has(name))).toEqual([]);
    expect(read('README.md')).toContain('(docs/multi-process.md)');
  });
});
