import { parseAllowedHosts } from './domain/oauth/outbound.ts';
import { z } from 'zod';
import { StartupError } from './startup-errors.ts';

const optional = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value));

/** Shorter bootstrap keys are refused: the key opens the whole organization. */
export const MIN_BOOTSTRAP_KEY_LENGTH = 24;

/** The server's settings: parsed once from the environment at start; nothing else reads `process.env`. */
export const Config = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  DATABASE_URL: z.string().default('./data/control-plane.db'),
  BOOTSTRAP_API_KEY: optional.refine((key) => key === undefined || key.length >= MIN_BOOTSTRAP_KEY_LENGTH, {
    message: `BOOTSTRAP_API_KEY must be at least ${MIN_BOOTSTRAP_KEY_LENGTH} characters long, because a shorter key can be guessed (generate one with: openssl rand -hex 24).`,
  }),
  PUBLIC_URL: optional,
  /**
   * Provider hosts (`host` or `host:port`, comma-separated) the OAuth helper may contact even when
   * they resolve to loopback, private, link-local or metadata addresses (an internal identity provider).
   */
  OAUTH_ALLOWED_HOSTS: z
    .string()
    .default('')
    .superRefine((value, ctx) => {
      try {
        parseAllowedHosts(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
      }
    }),
  GITHUB_WEBHOOK_SECRET: optional,
  GITHUB_WEBHOOK_SECRET_PREVIOUS: optional,
  SANDBOX_STAGE_MS: z.coerce.number().int().min(0).max(3_600_000).default(1000),
  ENCRYPTION_KEY: optional,
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /** `FULL` keeps every acknowledged write across a power loss; `NORMAL` only across a process crash. */
  SQLITE_SYNCHRONOUS: z.enum(['FULL', 'NORMAL']).default('FULL'),
  /** PostgreSQL only: the connections the server keeps to the database (each request holds one briefly). */
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(10),
  /** Accept `file:///…` repository URLs (local repositories: tests and experiments on one machine). */
  ALLOW_FILE_REPO_URLS: z
    .enum(['true', 'false', '1', '0'])
    .default('false')
    .transform((value) => value === 'true' || value === '1'),
  /** Domain under which `github` deployments get their automatic `custom_url`. */
  DEPLOYMENT_DOMAIN: z.string().default('sandbox.localhost'),
  /** How often the reconciler compares `build_on_push` branch heads (`git ls-remote`) with the newest revision; 0 turns it off. */
  RECONCILE_INTERVAL_MS: z.coerce.number().int().min(0).max(86_400_000).default(180_000),
  /**
   * The only hosts the reconciler's `git ls-remote` contacts: comma-separated `host` (its https port)
   * or `host:port`. A tenant's `repo_url` elsewhere is never contacted; webhooks still work for it.
   */
  RECONCILE_ALLOWED_HOSTS: z
    .string()
    .default('github.com')
    .transform((value) => value.split(',').map((h) => h.trim().toLowerCase()).filter((h) => h.length > 0))
    .pipe(z.array(z.string().regex(/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/, 'each entry must be host or host:port'))),
  /** How many `git ls-remote` the reconciler runs at once (a workspace takes at most a quarter of them). */
  RECONCILE_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(8),
  /** Time limit of one `git ls-remote`; the whole git process group is killed when it passes. */
  RECONCILE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(20_000),
  /** How long a listener agent's claim (and its listener's liveness) lasts without a renewal or heartbeat. */
  AGENT_LEASE_MS: z.coerce.number().int().min(200).max(3_600_000).default(30_000),
  /**
   * How long work a server process took stays its own without a renewal: a revision it runs, a
   * deployment it tears down, a webhook delivery it processes, an upload it receives. It renews
   * every third of this; when it dies, another process resumes its work once this has passed.
   */
  PIPELINE_LEASE_MS: z.coerce.number().int().min(300).max(3_600_000).default(15_000),
  /** Largest source tarball a signed upload URL takes (the hosted API's 200 MiB). */
  UPLOAD_MAX_BYTES: z.coerce.number().int().min(1).max(4 * 1024 ** 3).default(200 * 1024 * 1024),
  /** Bytes of complete source tarballs one workspace may keep stored (default 2 GiB, ten of the largest). */
  UPLOAD_WORKSPACE_QUOTA_BYTES: z.coerce.number().int().min(1).max(1024 ** 4).default(2 * 1024 ** 3),
  /** How long an upload URL from `POST …/upload-url` stays valid. */
  UPLOAD_URL_TTL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(900),
  /** Container registry that `internal_docker` clients push to (`POST …/push-token`). */
  REGISTRY_URL: optional,
  /** The token `POST …/push-token` hands out for `docker login` to REGISTRY_URL; a secret, never logged. */
  REGISTRY_PUSH_TOKEN: optional,
  /** Failed API-key attempts one client address may make at once before it gets 429 (issue 10). */
  AUTH_FAILURE_BURST: z.coerce.number().int().min(1).max(1_000_000).default(20),
  /** Failed API-key attempts per minute an address regains after its burst is spent. */
  AUTH_FAILURES_PER_MINUTE: z.coerce.number().min(0.01).max(6_000_000).default(60),
  /** Client addresses whose failures are remembered at most (bounds the throttle's memory). */
  AUTH_THROTTLE_ADDRESSES: z.coerce.number().int().min(1).max(10_000_000).default(10_000),
  /** Bytes of unauthenticated webhook bodies held in memory at once, all requests together; past it, 503 + Retry-After. */
  WEBHOOK_INFLIGHT_BYTES: z.coerce.number().int().min(1024).max(2 ** 40).default(64 * 1024 * 1024),
  /** Connections the main port holds at once; more are closed as they arrive. */
  MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(8192),
  /** Time for a request's headers to arrive (also: a connection that sends nothing is closed after it). */
  HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  /** Time for a whole request, body included, to arrive: long enough for the largest source tarball from a slow client (200 MiB in 5 min is 0.7 MB/s); slow headers are cut by HEADERS_TIMEOUT_MS. */
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(300_000),
  /** An idle keep-alive connection is closed after this long without a request. */
  KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5_000),
  /** A second port serving only `/healthz` and `/readyz`, with its own small connection cap; unset: none (`0`: any free port). */
  HEALTH_PORT: optional.transform((value) => (value === undefined ? undefined : Number(value))).pipe(z.number().int().min(0).max(65535).optional()),
  /** Connections the health port holds at once. */
  HEALTH_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(10_000).default(32),
  /** The GitHub App (contract §12): its id; with a private key it mints App JWTs and installation tokens. */
  GITHUB_APP_ID: optional.pipe(z.string().regex(/^\d+$/, 'GITHUB_APP_ID is the App\'s numeric id').optional()),
  /** The App's private key, PEM text (or GITHUB_APP_PRIVATE_KEY_FILE: a file holding it). */
  GITHUB_APP_PRIVATE_KEY: optional,
  GITHUB_APP_PRIVATE_KEY_FILE: optional,
  /** The App's URL name: its install page is GITHUB_URL/apps/<slug>/installations/new. */
  GITHUB_APP_SLUG: optional.pipe(z.string().regex(/^[a-z0-9-]+$/i, 'GITHUB_APP_SLUG is the App\'s URL name').optional()),
  /** The App's OAuth client: exchanges the `code` of the setup URL for a user token (proves who installed it). */
  GITHUB_APP_CLIENT_ID: optional,
  GITHUB_APP_CLIENT_SECRET: optional,
  /** GitHub's web and git host; GitHub Enterprise Server: https://<host>. */
  GITHUB_URL: z.url({ protocol: /^https?$/ }).default('https://github.com').transform((url) => url.replace(/\/+$/, '')),
  /** GitHub's REST API; GitHub Enterprise Server: https://<host>/api/v3. */
  GITHUB_API_URL: z.url({ protocol: /^https?$/ }).default('https://api.github.com').transform((url) => url.replace(/\/+$/, '')),
  /** How often idle previews (and previews of deleted deployments) are looked for and torn down. */
  PREVIEW_SWEEP_MS: z.coerce.number().int().min(100).max(86_400_000).default(60_000),
  /** Content-creating GitHub calls (statuses, deployments) per minute, all repositories together: under GitHub's secondary limit of about 80. */
  GITHUB_WRITES_PER_MINUTE: z.coerce.number().int().min(1).max(10_000).default(60),
  /** Test and debug setting: how long an accepted webhook delivery waits before it is processed. */
  WEBHOOK_PROCESS_DELAY_MS: z.coerce.number().int().min(0).max(3_600_000).default(0),
}).refine((config) => config.HEADERS_TIMEOUT_MS <= config.REQUEST_TIMEOUT_MS, {
  message: 'HEADERS_TIMEOUT_MS must not be longer than REQUEST_TIMEOUT_MS, because the headers are part of the request.',
  path: ['HEADERS_TIMEOUT_MS'],
}).refine((config) => !(config.GITHUB_APP_PRIVATE_KEY && config.GITHUB_APP_PRIVATE_KEY_FILE), {
  message: 'Set GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_FILE, not both.',
  path: ['GITHUB_APP_PRIVATE_KEY_FILE'],
}).refine((config) => config.GITHUB_APP_ID === undefined || config.GITHUB_APP_PRIVATE_KEY !== undefined || config.GITHUB_APP_PRIVATE_KEY_FILE !== undefined, {
  message: 'GITHUB_APP_ID needs the App\'s private key (GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_FILE).',
  path: ['GITHUB_APP_ID'],
});
export type Config = z.infer<typeof Config>;

export function loadConfig(env: NodeJS.ProcessEnv): Config {
  const result = Config.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new StartupError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

/** `PUBLIC_URL`, or where this server listens when it is not set. */
export function publicUrl(config: Config, port: number): string {
  return (config.PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, '');
}
