import { z } from 'zod';
import { parseAllowedHosts } from './lib/allowed-hosts.ts';
import { StartupError } from './startup-errors.ts';

const optional = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value));

/** A list of hosts an outbound rule lets through (`host` or `host:port`, comma-separated). */
const allowedHosts = z
  .string()
  .default('')
  .superRefine((value, ctx) => {
    try {
      parseAllowedHosts(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
    }
  });

/** Shorter bootstrap keys are refused: the key opens the whole organization. */
export const MIN_BOOTSTRAP_KEY_LENGTH = 24;

/**
 * The server's settings: parsed once from the environment at start; nothing else reads `process.env`.
 * Each setting's `describe()` is its documentation for operators: `npm run docs:config` renders
 * docs/configuration.md from this schema, and a test fails when the committed page differs.
 */
export const Config = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8080).describe('HTTP port (`0`: any free port, logged at start).'),
    HOST: z.string().default('127.0.0.1').describe('Bind address (`0.0.0.0` in a container).'),
    DATABASE_URL: z
      .string()
      .default('./data/control-plane.db')
      .describe(
        'SQLite file path, or `:memory:`, or `postgres://user:password@host:5432/db` (PostgreSQL, migrated at start; needs `ENCRYPTION_KEY`; any number of server processes on one database: [multi-process.md](multi-process.md)).',
      ),
    BOOTSTRAP_API_KEY: optional
      .refine((key) => key === undefined || key.length >= MIN_BOOTSTRAP_KEY_LENGTH, {
        message: `BOOTSTRAP_API_KEY must be at least ${MIN_BOOTSTRAP_KEY_LENGTH} characters long, because a shorter key can be guessed (generate one with: openssl rand -hex 24).`,
      })
      .describe(
        `At start, make sure organization \`default\`, its workspace \`default\` and an organization-scoped key with exactly this value exist: at least ${MIN_BOOTSTRAP_KEY_LENGTH} characters (\`openssl rand -hex 24\`), a shorter one stops the start. Unset on an empty database: a key is generated and printed once.`,
      ),
    PUBLIC_URL: optional.describe('The address the outside world uses (OAuth `redirect_uri`, upload URLs). Unset: `http://localhost:$PORT`.'),
    OAUTH_ALLOWED_HOSTS: allowedHosts.describe(
      'Comma-separated `host` or `host:port` that OAuth providers may name even when they resolve to loopback, private, link-local or metadata addresses (an internal identity provider); all others are refused ([oauth.md](oauth.md)).',
    ),
    EVENTS_ALLOWED_HOSTS: allowedHosts.describe(
      'Comma-separated `host` or `host:port` that event subscriptions may send to even when they resolve to loopback, private, link-local or metadata addresses (a receiver on the internal network); all others are refused ([operators-view.md](operators-view.md)).',
    ),
    GITHUB_WEBHOOK_SECRET: optional.describe("HMAC secret of the GitHub App's deliveries; unset: the App webhook answers 503."),
    GITHUB_OIDC_ISSUER: z
      .url({ protocol: /^https?$/, message: 'GITHUB_OIDC_ISSUER must be an http(s) URL, e.g. https://token.actions.githubusercontent.com' })
      .default('https://token.actions.githubusercontent.com')
      .transform((value) => value.replace(/\/+$/, ''))
      .describe(
        'Issuer of the GitHub Actions OIDC ID tokens that `POST /v1/auth/github-actions/token` exchanges for workspace keys of at most an hour; its `/.well-known/openid-configuration` names the signing keys ([keyless-ci.md](keyless-ci.md)).',
      ),
    GITHUB_OIDC_AUDIENCE: optional.describe(
      "The `aud` those ID tokens must carry (the Action's `oidc-audience`, by default its `api-url`); unset: `PUBLIC_URL`.",
    ),
    GITHUB_WEBHOOK_SECRET_PREVIOUS: optional.describe('Comma-separated older secrets still accepted (rotation).'),
    SANDBOX_STAGE_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(3_600_000)
      .default(1000)
      .describe('How long each simulated build or deploy stage of the sandbox takes.'),
    ENCRYPTION_KEY: optional.describe(
      '32 bytes, base64 (`openssl rand -base64 32`): key for secrets, OAuth client secrets and tokens at rest. Unset: generated once into `<database>.key` (mode 0600), with a warning; PostgreSQL needs it set.',
    ),
    LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info').describe('`debug`, `info`, `warn`, `error` or `silent`.'),
    OTEL_EXPORTER_OTLP_ENDPOINT: optional
      .refine((value) => value === undefined || /^https?:\/\/[^\s]+$/.test(value), {
        message: 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL, e.g. http://collector:4318',
      })
      .describe(
        "OpenTelemetry collector (OTLP/HTTP, e.g. `http://collector:4318`): when set, spans of requests (children of the caller's `traceparent`), revisions' status changes, webhook deliveries and GitHub calls are exported to `<endpoint>/v1/traces`. Unset: tracing is off and its SDK is not loaded.",
      ),
    OTEL_SERVICE_NAME: z.string().min(1).default('agent-control-plane').describe('The `service.name` of the exported spans.'),
    AUDIT_RETENTION_DAYS: z.coerce
      .number()
      .int()
      .min(1)
      .max(36_500)
      .default(365)
      .describe('How many days audit entries (`GET /v1/audit-events`) are kept; older ones are removed once an hour.'),
    SQLITE_SYNCHRONOUS: z
      .enum(['FULL', 'NORMAL'])
      .default('FULL')
      .describe('`FULL`: an acknowledged write survives a power loss; `NORMAL`: only a process crash (faster writes).'),
    DATABASE_POOL_SIZE: z.coerce
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(10)
      .describe('PostgreSQL only: connections the server keeps to the database (each request holds one briefly).'),
    ALLOW_FILE_REPO_URLS: z
      .enum(['true', 'false', '1', '0'])
      .default('false')
      .transform((value) => value === 'true' || value === '1')
      .describe('`true` or `1`: accept `file:///` repository URLs (local repositories: tests and experiments on one machine).'),
    DEPLOYMENT_DOMAIN: z
      .string()
      .default('sandbox.localhost')
      .describe(
        'Domain of the `custom_url` the server sets for `github`, `internal_source` and `internal_docker` deployments until an agent serving one reports its own URL (its `--public-url`).',
      ),
    RECONCILE_INTERVAL_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(86_400_000)
      .default(180_000)
      .describe('How often the reconciler compares `build_on_push` branch heads (`git ls-remote`) with the newest revisions; `0` turns it off.'),
    RECONCILE_ALLOWED_HOSTS: z
      .string()
      .default('github.com')
      .transform((value) =>
        value
          .split(',')
          .map((h) => h.trim().toLowerCase())
          .filter((h) => h.length > 0),
      )
      .pipe(z.array(z.string().regex(/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/, 'each entry must be host or host:port')))
      .describe(
        "The only hosts the reconciler's `git ls-remote` contacts: comma-separated `host` (its https port) or `host:port`. A tenant's `repo_url` elsewhere is never contacted; webhooks still work for it.",
      ),
    RECONCILE_CONCURRENCY: z.coerce
      .number()
      .int()
      .min(1)
      .max(64)
      .default(8)
      .describe('`git ls-remote` runs the reconciler makes at once (a workspace gets at most a quarter of them).'),
    RECONCILE_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(600_000)
      .default(20_000)
      .describe('Time limit of one `git ls-remote`; the whole git process group is killed when it passes.'),
    AGENT_LEASE_MS: z.coerce
      .number()
      .int()
      .min(200)
      .max(3_600_000)
      .default(30_000)
      .describe("A listener agent's claim lease, and how long a silent listener keeps its deployments `READY` before they show `UNKNOWN`."),
    PIPELINE_LEASE_MS: z.coerce
      .number()
      .int()
      .min(300)
      .max(3_600_000)
      .default(15_000)
      .describe(
        "How long work a server process took stays its own without a renewal: the revisions it started (under one lease per process), a deployment's teardown, a webhook delivery, an upload being received. It renews every third of it; when it dies, another process resumes its work once this has passed.",
      ),
    UPLOAD_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(1)
      .max(4 * 1024 ** 3)
      .default(200 * 1024 * 1024)
      .describe("Largest source tarball an upload URL takes (the hosted API's 200 MiB)."),
    UPLOAD_WORKSPACE_QUOTA_BYTES: z.coerce
      .number()
      .int()
      .min(1)
      .max(1024 ** 4)
      .default(2 * 1024 ** 3)
      .describe(
        'Bytes of complete source tarballs one workspace may keep (2 GiB: ten of the largest). A tarball past it: 413; a new URL when at it: 400. A deployment holds at most 5 open upload URLs (409), and tarballs no revision names are swept one URL lifetime after upload.',
      ),
    UPLOAD_URL_TTL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(900).describe('How long an upload URL from `POST …/upload-url` stays valid.'),
    REGISTRY_URL: optional.describe('Container registry `internal_docker` clients push to; with `REGISTRY_PUSH_TOKEN`, `POST …/push-token` answers both.'),
    REGISTRY_PUSH_TOKEN: optional.describe('The push token `POST …/push-token` hands out for `docker login` to `REGISTRY_URL` (a secret: never logged).'),
    AUTH_FAILURE_BURST: z.coerce
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(20)
      .describe('Failed API-key attempts one client address may make at once before it gets 429.'),
    AUTH_FAILURES_PER_MINUTE: z.coerce
      .number()
      .min(0.01)
      .max(6_000_000)
      .default(60)
      .describe('Failed API-key attempts per minute an address regains after its burst is spent.'),
    AUTH_THROTTLE_ADDRESSES: z.coerce
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(10_000)
      .describe("Client addresses whose failures are remembered at most (bounds the throttle's memory)."),
    WEBHOOK_INFLIGHT_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(2 ** 40)
      .default(64 * 1024 * 1024)
      .describe('Bytes of not-yet-authenticated webhook bodies held in memory at once, all requests together (64 MiB); past it, 503 with `Retry-After`.'),
    MAX_CONNECTIONS: z.coerce
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(8192)
      .describe('Connections the main port holds at once; more are closed as they arrive.'),
    HEADERS_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(600_000)
      .default(10_000)
      .describe("Time for a request's headers to arrive; a connection that sends nothing is closed after it too. At most `REQUEST_TIMEOUT_MS`."),
    REQUEST_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(300_000)
      .describe(
        'Time for a whole request, body included, to arrive: it must let the largest source tarball (`UPLOAD_MAX_BYTES`, 200 MiB) arrive from the slowest client you accept (5 min = 0.7 MB/s); slow headers are cut by `HEADERS_TIMEOUT_MS`.',
      ),
    KEEP_ALIVE_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(600_000)
      .default(5_000)
      .describe('An idle keep-alive connection is closed after this long without a request.'),
    HEALTH_PORT: optional
      .transform((value) => (value === undefined ? undefined : Number(value)))
      .pipe(z.number().int().min(0).max(65535).optional())
      .describe(
        'A second port serving only `/healthz` and `/readyz` (`0`: any free port, logged as `health_port`), with its own small connection cap, so probes keep an answer while the main port is flooded. Unset: none.',
      ),
    HEALTH_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(10_000).default(32).describe('Connections the health port holds at once.'),
    LOG_REVISION_MAX_LINES: z.coerce
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(20_000)
      .describe(
        'Log lines one revision keeps (build and deploy together); past it, one line "log truncated: N lines dropped" and the rest are dropped, never the status ([decisions/log-caps.md](decisions/log-caps.md)).',
      ),
    LOG_REVISION_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(2 ** 40)
      .default(8 * 1024 * 1024)
      .describe('Bytes of log messages (UTF-8) one revision keeps (8 MiB); past it, as for the lines.'),
    LOG_TOKEN_LINES_PER_SECOND: z.coerce
      .number()
      .min(1)
      .max(10_000_000)
      .default(1_000)
      .describe('Log lines per second one agent token may append, sustained (bursts of twice this); past it, 429 with `Retry-After`.'),
    LOG_TOKEN_BYTES_PER_SECOND: z.coerce
      .number()
      .int()
      .min(1024)
      .max(2 ** 40)
      .default(1024 * 1024)
      .describe('Bytes of log messages per second one agent token may append, sustained (bursts of twice this).'),
    RUNTIME_LOG_LINES_PER_SECOND: z.coerce
      .number()
      .min(0.01)
      .max(10_000_000)
      .default(50)
      .describe(
        "Runtime log lines (what a live revision's server prints after `DEPLOYED`) per second one deployment may store, sustained; past it, lines are counted as dropped (one line says how many). The revision's whole log is still capped by `LOG_REVISION_MAX_LINES`.",
      ),
    RUNTIME_LOG_BURST: z.coerce
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(500)
      .describe('Runtime log lines one deployment may store at once before its rate applies.'),
    RUNTIME_LOG_TOKEN_LINES_PER_SECOND: z.coerce
      .number()
      .min(0.01)
      .max(10_000_000)
      .default(200)
      .describe('Runtime log lines per second all deployments of one agent token may store together, sustained.'),
    RUNTIME_LOG_TOKEN_BURST: z.coerce
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(2000)
      .describe('Runtime log lines all deployments of one agent token may store at once before their rate applies.'),
    GITHUB_APP_ID: optional
      .pipe(z.string().regex(/^\d+$/, "GITHUB_APP_ID is the App's numeric id").optional())
      .describe(
        "The GitHub App's numeric id; with its private key the server mints App JWTs and installation tokens (private repositories, status back to GitHub, previews: [github-app.md](github-app.md)). Unset: public repositories only, no status.",
      ),
    GITHUB_APP_PRIVATE_KEY: optional.describe("The App's private key, PEM text (a secret: never logged)."),
    GITHUB_APP_PRIVATE_KEY_FILE: optional.describe("A file holding the App's private key (instead of `GITHUB_APP_PRIVATE_KEY`)."),
    GITHUB_APP_SLUG: optional
      .pipe(
        z
          .string()
          .regex(/^[a-z0-9-]+$/i, "GITHUB_APP_SLUG is the App's URL name")
          .optional(),
      )
      .describe(
        "The App's URL name: its install page is `GITHUB_URL/apps/<slug>/installations/new`, or `GITHUB_URL/github-apps/<slug>/installations/new` on GitHub Enterprise Server (`GITHUB_API_URL` ending in `/api/v3`).",
      ),
    GITHUB_APP_CLIENT_ID: optional.describe(
      "The App's OAuth client id: the setup URL exchanges its `code` for a user token that proves who installed the App.",
    ),
    GITHUB_APP_CLIENT_SECRET: optional.describe("The App's OAuth client secret (a secret: never logged)."),
    GITHUB_URL: z
      .url({ protocol: /^https?$/ })
      .default('https://github.com')
      .transform((url) => url.replace(/\/+$/, ''))
      .describe("GitHub's web and git host; GitHub Enterprise Server: `https://<host>`."),
    GITHUB_API_URL: z
      .url({ protocol: /^https?$/ })
      .default('https://api.github.com')
      .transform((url) => url.replace(/\/+$/, ''))
      .describe("GitHub's REST API; GitHub Enterprise Server: `https://<host>/api/v3`."),
    PREVIEW_SWEEP_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(86_400_000)
      .default(60_000)
      .describe('How often idle previews (and previews of deleted deployments) are looked for and torn down.'),
    GITHUB_WRITES_PER_MINUTE: z.coerce
      .number()
      .int()
      .min(1)
      .max(80, "GITHUB_WRITES_PER_MINUTE is at most 80: GitHub's secondary limit for content-creating calls")
      .default(80)
      .describe("Content-creating GitHub calls (deployments, statuses, check runs) per installation in any minute: GitHub's secondary limit is 80."),
    GITHUB_WRITES_PER_HOUR: z.coerce
      .number()
      .int()
      .min(1)
      .max(500, "GITHUB_WRITES_PER_HOUR is at most 500: GitHub's secondary limit for content-creating calls")
      .default(500)
      .describe("Content-creating GitHub calls per installation in any hour: GitHub's secondary limit is 500."),
    WEBHOOK_PROCESS_DELAY_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(3_600_000)
      .default(0)
      .describe('Test and debug only: how long an accepted webhook delivery waits before it is processed.'),
    CONSOLE_SESSION_SECONDS: z.coerce
      .number()
      .int()
      .min(60)
      .max(43_200)
      .default(43_200)
      .describe('How long a web console session lasts after sign-in (at most 12 h); revoking its API key ends it sooner.'),
    CONSOLE_LIVE_INTERVAL_MS: z.coerce
      .number()
      .int()
      .min(100)
      .max(60_000)
      .default(1_000)
      .describe(
        'How often the web console looks for changes to what its open pages show (one small query per watched object per interval); pages update within this time.',
      ),
  })
  .refine((config) => config.HEADERS_TIMEOUT_MS <= config.REQUEST_TIMEOUT_MS, {
    message: 'HEADERS_TIMEOUT_MS must not be longer than REQUEST_TIMEOUT_MS, because the headers are part of the request.',
    path: ['HEADERS_TIMEOUT_MS'],
  })
  .refine((config) => !(config.GITHUB_APP_PRIVATE_KEY && config.GITHUB_APP_PRIVATE_KEY_FILE), {
    message: 'Set GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_FILE, not both.',
    path: ['GITHUB_APP_PRIVATE_KEY_FILE'],
  })
  .refine((config) => config.GITHUB_APP_ID === undefined || config.GITHUB_APP_PRIVATE_KEY !== undefined || config.GITHUB_APP_PRIVATE_KEY_FILE !== undefined, {
    message: "GITHUB_APP_ID needs the App's private key (GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_FILE).",
    path: ['GITHUB_APP_ID'],
  });
export type Config = z.infer<typeof Config>;

export function loadConfig(env: NodeJS.ProcessEnv): Config {
  // Parsed once: zod's compiled fast path for this object costs more to build than one parse saves.
  const result = Config.safeParse(env, { jitless: true });
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
