import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jwtVerify } from 'jose';
import { gitHttpBackend } from '../../demo/git-http-backend.ts';
import { TEST_KEEP_ALIVE_MS } from '../helpers/keep-alive.ts';
import { GithubOpenApi } from './openapi-check.ts';

/** One request the stand-in received, with what it answered. */
export type Exchange = {
  method: string;
  path: string;
  template: string | null;
  body: unknown;
  status: number;
  answer: unknown;
  auth: string;
  problems: string[];
  /** When the stand-in answered (`performance.now()` of the test's process). */
  atMs: number;
};

/** A fault to answer instead of the real thing (GitHub outages, rate limits, caps). */
export type Fault = { method: string; path: RegExp; status: number; headers?: Record<string, string>; body?: unknown; times: number };

type Account = { login: string; id: number; type: 'User' | 'Organization' };
type Installation = { id: number; account: Account; repositories: string[]; users: Set<string>; permissions: Record<string, string> };

/** What an installation grants unless a test says otherwise: what the App asked for before check runs. */
const DEFAULT_PERMISSIONS = { contents: 'read', deployments: 'write', statuses: 'write', metadata: 'read', pull_requests: 'read' };
type MintedToken = { installationId: number; repositories: string[]; permissions: Record<string, string>; expiresAtMs: number };

let openApi: GithubOpenApi | null = null;
/** GitHub's description is 73 MB: read once per test file. */
function description(): GithubOpenApi {
  openApi ??= new GithubOpenApi();
  return openApi;
}

/**
 * A GitHub stand-in on loopback for the round trip of contract §12, simulated (it is not
 * github.com) but held to GitHub's published OpenAPI description: every REST request and every
 * answer is checked against it, and a request that does not fit is answered 422 and recorded as a
 * problem (`problems()`), so a test fails on anything GitHub would not accept.
 *
 * It serves, like a GitHub Enterprise Server: the web host (`/login/oauth/access_token`, the
 * install page), the REST API under `/api/v3`, and git over HTTP: the system's `git http-backend`
 * (real git, CGI) behind HTTP Basic auth that accepts only an installation token this stand-in
 * minted for that very repository with `contents` access, unexpired.
 */
export class GithubStandIn {
  // The App's identity: replaced when a manifest conversion makes a new App (`manifestConversion`).
  appId = String(100_000 + Math.floor(Math.random() * 800_000));
  slug = 'control-plane-test';
  clientId = `Iv1.${randomBytes(8).toString('hex')}`;
  clientSecret = randomBytes(20).toString('hex');
  privateKeyPem: string;
  /** The webhook secret GitHub generated for an App made from a manifest; null before. */
  webhookSecret: string | null = null;
  #publicKey: KeyObject;
  /** Manifests posted to the "new App" pages, with the organization they were posted under. */
  readonly manifests: Array<{ organization: string | null; manifest: Record<string, unknown>; state: string | null }> = [];
  readonly #manifestCodes = new Map<string, Record<string, unknown>>();
  readonly reposRoot = mkdtempSync(join(tmpdir(), 'cp-github-repos-'));
  readonly exchanges: Exchange[] = [];
  /** Visits of the OAuth authorization page. */
  readonly authorizations: Array<{ clientId: string | null; redirectUri: string | null; state: string | null }> = [];
  readonly gitRequests: Array<{
    repo: string;
    authorized: boolean;
    hadAuthorization: boolean;
    tokenRepositories: string[] | null;
    tokenPermissions: Record<string, string> | null;
  }> = [];
  readonly #installations = new Map<number, Installation>();
  readonly #codes = new Map<string, string>();
  readonly #userTokens = new Map<string, string>();
  readonly #tokens = new Map<string, MintedToken>();
  readonly #faults: Fault[] = [];
  readonly #repositoryIds = new Map<string, number>();
  readonly #slow: Array<{ method: string; path: RegExp; delayMs: number; times: number }> = [];
  /** Everything GitHub would show on a repository, as posted. */
  readonly deployments: Array<{
    id: number;
    repo: string;
    body: Record<string, unknown>;
    json: unknown;
    statuses: Array<Record<string, unknown>>;
    statusJson: unknown[];
  }> = [];
  readonly commitStatuses: Array<{ repo: string; sha: string; body: Record<string, unknown>; json: unknown }> = [];
  /** Check runs as GitHub keeps them: the fields as they stand, and every create or update as sent. */
  readonly checkRuns: Array<{ id: number; repo: string; fields: Record<string, unknown>; updates: Array<Record<string, unknown>> }> = [];
  /** GitHub's clock: a test that moves the server's clock moves this one with it (App JWTs and token expiry are checked on it). */
  now: () => number = Date.now;
  /** Statuses GitHub keeps per commit and context (GitHub's is 1000); past it, 422. */
  statusCap = 1000;
  #server: Server | null = null;
  #nextId = 1000;
  url = '';

  constructor() {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.privateKeyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    this.#publicKey = publicKey;
    description();
  }

  get apiUrl(): string {
    return `${this.url}/api/v3`;
  }

  /** The server settings that make the control plane use this stand-in as its GitHub. */
  serverEnv(): Record<string, string> {
    return {
      GITHUB_APP_ID: this.appId,
      GITHUB_APP_PRIVATE_KEY: this.privateKeyPem,
      GITHUB_APP_SLUG: this.slug,
      GITHUB_APP_CLIENT_ID: this.clientId,
      GITHUB_APP_CLIENT_SECRET: this.clientSecret,
      GITHUB_URL: this.url,
      GITHUB_API_URL: this.apiUrl,
    };
  }

  async start(): Promise<this> {
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: String(error) }));
      });
    });
    // The server under test calls it: its idle connections outlive any wait of a test (keep-alive.ts).
    this.#server.keepAliveTimeout = TEST_KEEP_ALIVE_MS;
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    const address = this.#server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }

  /** An installation of the App on `account`, granted `repositories` (`owner/name`) and `permissions`, visible to `users`. */
  install(account: Account, repositories: string[], users: string[], permissions: Record<string, string> = DEFAULT_PERMISSIONS): number {
    const id = this.#nextId++;
    this.#installations.set(id, { id, account, repositories, users: new Set(users), permissions });
    return id;
  }

  /** The id GitHub gives a repository `owner/name` (stable for the stand-in's life, as GitHub's is across renames). */
  repositoryId(fullName: string): number {
    let id = this.#repositoryIds.get(fullName);
    if (id === undefined) {
      id = 70_000 + this.#repositoryIds.size;
      this.#repositoryIds.set(fullName, id);
    }
    return id;
  }

  /** What GitHub gives the setup URL when `login` authorizes the App: a one-time code. */
  codeFor(login: string): string {
    const code = randomBytes(10).toString('hex');
    this.#codes.set(code, login);
    return code;
  }

  /** A bare repository `owner/name` served over git, holding what `push` is given (a local path to push from). */
  createRepository(fullName: string): string {
    const dir = join(this.reposRoot, `${fullName}.git`);
    mkdirSync(dir, { recursive: true });
    execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', dir]);
    return dir;
  }

  /** Answers the next `times` matching requests with a fault instead. */
  fail(fault: Omit<Fault, 'times'> & { times?: number }): void {
    this.#faults.push({ ...fault, times: fault.times ?? 1 });
  }

  clearFaults(): void {
    this.#faults.length = 0;
    this.#slow.length = 0;
  }

  /** Carries out the next `times` matching requests, then holds their answers back `delayMs` (a caller killed meanwhile never learns). */
  slow(rule: { method: string; path: RegExp; delayMs: number; times?: number }): void {
    this.#slow.push({ ...rule, times: rule.times ?? 1 });
  }

  /**
   * GitHub's `auto_inactive` (the default) on a `success` status: every earlier non-transient,
   * non-production deployment of the same repository and environment whose last status is
   * `success` gains an `inactive` status (REST "Create a deployment status", as its text says).
   */
  #autoInactive(deployment: { id: number; repo: string; body: Record<string, unknown> }): void {
    for (const prior of this.deployments) {
      if (prior.id >= deployment.id || prior.repo !== deployment.repo || prior.body.environment !== deployment.body.environment) continue;
      if (prior.body.transient_environment === true || prior.body.production_environment === true || prior.statuses.at(-1)?.state !== 'success') continue;
      prior.statuses.push({ state: 'inactive', added_by: 'auto_inactive' });
    }
  }

  /** Requests or answers that GitHub's description does not allow. */
  problems(): string[] {
    return this.exchanges.flatMap((e) => e.problems.map((p) => `${e.method} ${e.path}: ${p}`));
  }

  /** Installation tokens minted so far (to check narrowing, and that none leaked). */
  mintedTokens(): Array<{ token: string } & MintedToken> {
    return [...this.#tokens].map(([token, minted]) => ({ token, ...minted }));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    // Like GitHub, git is served at /<owner>/<repo>.git/… and /<owner>/<repo>/….
    if (GIT_PATH.test(url.pathname)) return this.#git(req, res, url);
    const raw = await readBody(req);
    if (url.pathname === '/login/oauth/access_token' && req.method === 'POST') return this.#exchangeCode(raw, res, req.headers['content-type'] ?? '');
    if (url.pathname === '/login/oauth/authorize' && req.method === 'GET') return this.#authorize(url, res);
    const newApp = /^(?:\/organizations\/([^/]+))?\/settings\/apps\/new$/.exec(url.pathname);
    if (newApp && req.method === 'POST') return this.#newAppFromManifest(newApp[1] ?? null, url, raw, res);
    if (url.pathname.startsWith('/api/v3/')) return this.#rest(req, res, url, raw);
    res.writeHead(404).end();
  }

  /**
   * GitHub's OAuth authorization page (web host) for the browser of the user signed in there
   * (`asBrowserOf`): a user who already authorized the App is sent straight back to `redirect_uri`
   * with a code and the `state` as given; an unknown client id or a `redirect_uri` off the App's
   * callback host is an error page, as on GitHub.
   */
  #authorize(url: URL, res: ServerResponse): void {
    const login = url.searchParams.get('login_as');
    const redirect = url.searchParams.get('redirect_uri');
    this.authorizations.push({ clientId: url.searchParams.get('client_id'), redirectUri: redirect, state: url.searchParams.get('state') });
    if (url.searchParams.get('client_id') !== this.clientId || !redirect || !login) {
      res.writeHead(404, { 'content-type': 'text/html' }).end('<p>Unknown application or not signed in</p>');
      return;
    }
    const back = new URL(redirect);
    back.searchParams.set('code', this.codeFor(login));
    const state = url.searchParams.get('state');
    if (state) back.searchParams.set('state', state);
    res.writeHead(302, { location: back.toString() }).end();
  }

  /**
   * GitHub's "new App from a manifest" page (web host): takes the form's `manifest` (JSON, with the
   * fields GitHub requires: `url`, `hook_attributes.url`), and, as if the user clicked "Create",
   * sends the browser to the manifest's `redirect_url` with a one-hour code and the `state` as given.
   */
  #newAppFromManifest(organization: string | null, url: URL, raw: string, res: ServerResponse): void {
    let manifest: Record<string, unknown> | null = null;
    try {
      manifest = JSON.parse(new URLSearchParams(raw).get('manifest') ?? 'null') as Record<string, unknown> | null;
    } catch {
      manifest = null;
    }
    const hook = manifest?.hook_attributes as { url?: unknown } | undefined;
    if (!manifest || typeof manifest.url !== 'string' || typeof hook?.url !== 'string' || typeof manifest.redirect_url !== 'string') {
      res.writeHead(422, { 'content-type': 'text/html' }).end('<p>Invalid GitHub App configuration</p>');
      return;
    }
    const state = url.searchParams.get('state');
    this.manifests.push({ organization, manifest, state });
    const code = randomBytes(10).toString('hex');
    this.#manifestCodes.set(code, { ...manifest, organization });
    const back = new URL(manifest.redirect_url);
    back.searchParams.set('code', code);
    if (state) back.searchParams.set('state', state);
    res.writeHead(302, { location: back.toString() }).end();
  }

  /** `url` on the stand-in's web host as `login`'s signed-in browser opens it (the stand-in's stand-in for GitHub's session cookie). */
  asBrowserOf(login: string, url: URL): string {
    const signedIn = new URL(url);
    signedIn.searchParams.set('login_as', login);
    return signedIn.toString();
  }

  /** The OAuth code exchange (web host, not part of the REST description): GitHub's documented form. */
  #exchangeCode(raw: string, res: ServerResponse, contentType: string): void {
    // GitHub takes the OAuth form encoding (and JSON).
    const body = (contentType.startsWith('application/json') ? JSON.parse(raw || '{}') : Object.fromEntries(new URLSearchParams(raw))) as {
      client_id?: string;
      client_secret?: string;
      code?: string;
    };
    const login = body.code ? this.#codes.get(body.code) : undefined;
    const answer = (value: unknown): void => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    if (body.client_id !== this.clientId || body.client_secret !== this.clientSecret) {
      answer({ error: 'incorrect_client_credentials' });
      return;
    }
    if (!login) {
      answer({ error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
      return;
    }
    this.#codes.delete(body.code!);
    const token = `ghu_${randomBytes(18).toString('hex')}`;
    this.#userTokens.set(token, login);
    answer({ access_token: token, token_type: 'bearer', scope: '' });
  }

  async #rest(req: IncomingMessage, res: ServerResponse, url: URL, raw: string): Promise<void> {
    const method = req.method ?? 'GET';
    const path = url.pathname.slice('/api/v3'.length);
    const api = description();
    const template = api.templateOf(method, path);
    let body: unknown;
    const problems: string[] = [];
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      problems.push('the body is not JSON');
    }
    if (!template) problems.push("no such operation in GitHub's description");
    else problems.push(...api.checkRequest(method, template, body));
    if (req.headers.accept !== 'application/vnd.github+json') problems.push(`Accept is ${req.headers.accept}, not application/vnd.github+json`);
    if (!req.headers['user-agent']) problems.push('no User-Agent (GitHub refuses requests without one)');
    const auth = req.headers.authorization ?? '';
    const slow = this.#slow.find((r) => r.method === method && r.path.test(path) && r.times > 0);
    if (slow) slow.times -= 1;
    const send = (status: number, answer: unknown, headers: Record<string, string> = {}, checked = true) => {
      if (checked && template) problems.push(...api.checkResponse(method, template, status, answer));
      this.exchanges.push({ method, path, template, body, status, answer, auth: auth.split(' ')[0] ?? '', problems, atMs: performance.now() });
      const write = () => {
        if (!res.destroyed) res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(answer === undefined ? '' : JSON.stringify(answer));
      };
      if (slow) setTimeout(write, slow.delayMs);
      else write();
    };
    if (problems.length > 0) return send(422, { message: 'Validation Failed', errors: problems, documentation_url: 'https://docs.github.com/rest' }, {}, false);
    const fault = this.#faults.find((f) => f.method === method && f.path.test(path) && f.times > 0);
    if (fault) {
      fault.times -= 1;
      return send(fault.status, fault.body ?? { message: 'fault', documentation_url: 'https://docs.github.com/rest' }, fault.headers, false);
    }
    const json = (body ?? {}) as Record<string, unknown>;
    let m: RegExpExecArray | null;
    m = /^\/app-manifests\/([^/]+)\/conversions$/.exec(path);
    if (m && method === 'POST') {
      const manifest = this.#manifestCodes.get(m[1]!);
      if (!manifest) return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      this.#manifestCodes.delete(m[1]!);
      return send(201, this.#becomeAppOf(manifest));
    }
    m = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path);

    if (m && method === 'POST') {
      if (!(await this.#appJwtOk(auth)))
        return send(401, { message: 'A JSON web token could not be decoded', documentation_url: 'https://docs.github.com/rest' });
      const installation = this.#installations.get(Number(m[1]));
      if (!installation) return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      // Narrowed by names or by ids, as GitHub takes either.
      const ids = json.repository_ids as number[] | undefined;
      const names = (json.repositories as string[] | undefined) ?? (ids ? [] : installation.repositories.map((r) => r.split('/')[1]!));
      const repositories = [
        ...names.map((n) => installation.repositories.find((r) => r.split('/')[1] === n)),
        ...(ids ?? []).map((id) => installation.repositories.find((r) => this.repositoryId(r) === id)),
      ];
      if (repositories.some((r) => r === undefined))
        return send(422, {
          message: 'There is at least one repository that does not exist or is not accessible to the parent installation.',
          documentation_url: 'https://docs.github.com/rest',
        });
      // A token asks for no more than the installation granted (GitHub: 422).
      const asked = Object.entries((json.permissions as Record<string, string> | undefined) ?? {});
      if (asked.some(([name, level]) => !installation.permissions[name] || (level === 'write' && installation.permissions[name] !== 'write')))
        return send(422, { message: 'The permissions requested are not granted to this installation.', documentation_url: 'https://docs.github.com/rest' });
      const token = `ghs_${randomBytes(18).toString('hex')}`;
      const permissions = (json.permissions as Record<string, string> | undefined) ?? {
        contents: 'write',
        deployments: 'write',
        statuses: 'write',
        metadata: 'read',
      };
      const expiresAtMs = this.now() + 3600_000;
      this.#tokens.set(token, { installationId: installation.id, repositories: repositories as string[], permissions, expiresAtMs });
      return send(201, {
        token,
        expires_at: new Date(expiresAtMs).toISOString().replace(/\.\d+Z$/, 'Z'),
        permissions,
        repository_selection: 'selected',
        repositories: (repositories as string[]).map((r) => this.#repositoryJson(r)),
      });
    }
    m = /^\/app\/installations\/(\d+)$/.exec(path);

    if (m && method === 'GET') {
      if (!(await this.#appJwtOk(auth)))
        return send(401, { message: 'A JSON web token could not be decoded', documentation_url: 'https://docs.github.com/rest' });
      const installation = this.#installations.get(Number(m[1]));
      if (!installation) return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      return send(200, this.#installationJson(installation));
    }
    if (path === '/user/installations' && method === 'GET') {
      const login = this.#userTokens.get(auth.replace(/^(Bearer|token) /, ''));
      if (!login) return send(401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
      const installations = [...this.#installations.values()].filter((i) => i.users.has(login)).map((i) => this.#installationJson(i));
      return send(200, { total_count: installations.length, installations });
    }
    // Writes on a repository: an installation token with the right permission for that repository.
    m = /^\/repos\/([^/]+)\/([^/]+)\//.exec(path);

    if (m) {
      const repo = `${m[1]}/${m[2]}`;
      const token = this.#tokens.get(auth.replace(/^(Bearer|token) /, ''));
      const needed = path.includes('/deployments') ? 'deployments' : path.includes('/check-runs') ? 'checks' : 'statuses';
      if (!token || token.expiresAtMs < this.now())
        return send(401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' }, {}, false);
      if (!token.repositories.includes(repo) || token.permissions[needed] !== 'write')
        return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' }, {}, false);
      const now = new Date(this.now()).toISOString().replace(/\.\d+Z$/, 'Z');
      if (/^\/repos\/[^/]+\/[^/]+\/deployments$/.test(path) && method === 'GET') {
        const sha = url.searchParams.get('sha');
        const environment = url.searchParams.get('environment');
        return send(
          200,
          this.deployments
            .filter((d) => d.repo === repo && (!sha || d.body.ref === sha) && (!environment || d.body.environment === environment))
            .map((d) => d.json)
            .reverse(),
        );
      }
      m = /^\/repos\/[^/]+\/[^/]+\/deployments\/(\d+)\/statuses$/.exec(path);

      if (m && method === 'GET') {
        const deployment = this.deployments.find((d) => d.id === Number(m![1]) && d.repo === repo);
        if (!deployment) return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
        return send(200, [...deployment.statusJson].reverse());
      }
      m = /^\/repos\/[^/]+\/[^/]+\/commits\/([^/]+)\/statuses$/.exec(path);

      if (m && method === 'GET') {
        return send(
          200,
          this.commitStatuses
            .filter((c) => c.repo === repo && c.sha === m![1])
            .map((c) => c.json)
            .reverse(),
        );
      }
      m = /^\/repos\/[^/]+\/[^/]+\/commits\/([^/]+)\/check-runs$/.exec(path);
      if (m && method === 'GET') {
        const name = url.searchParams.get('check_name');
        const runs = this.checkRuns
          .filter((r) => r.repo === repo && r.fields.head_sha === m![1] && (!name || r.fields.name === name))
          .map((r) => this.#checkRunJson(r));
        return send(200, { total_count: runs.length, check_runs: runs });
      }
      if (/^\/repos\/[^/]+\/[^/]+\/check-runs$/.test(path) && method === 'POST') {
        const run = { id: this.#nextId++, repo, fields: { ...json }, updates: [{ ...json }] };
        this.checkRuns.push(run);
        return send(201, this.#checkRunJson(run));
      }
      m = /^\/repos\/[^/]+\/[^/]+\/check-runs\/(\d+)$/.exec(path);
      if (m && method === 'PATCH') {
        const run = this.checkRuns.find((r) => r.id === Number(m![1]) && r.repo === repo);
        if (!run) return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
        run.fields = { ...run.fields, ...json };
        run.updates.push({ ...json });
        return send(200, this.#checkRunJson(run));
      }
      if (/^\/repos\/[^/]+\/[^/]+\/deployments$/.test(path) && method === 'POST') {
        const id = this.#nextId++;
        const entry = { id, repo, body: json, json: null as unknown, statuses: [] as Array<Record<string, unknown>>, statusJson: [] as unknown[] };
        this.deployments.push(entry);
        entry.json = {
          url: `${this.apiUrl}/repos/${repo}/deployments/${id}`,
          id,
          node_id: `DE_${id}`,
          sha: String(json.ref),
          ref: String(json.ref),
          task: 'deploy',
          // GitHub answers the payload it was given (the server finds a deployment again by it after a crash).
          payload: json.payload ?? {},
          environment: String(json.environment ?? 'production'),
          description: (json.description as string | null) ?? null,
          creator: botUser(this.slug),
          created_at: now,
          updated_at: now,
          statuses_url: `${this.apiUrl}/repos/${repo}/deployments/${id}/statuses`,
          repository_url: `${this.apiUrl}/repos/${repo}`,
          transient_environment: Boolean(json.transient_environment),
        };
        return send(201, entry.json);
      }
      m = /^\/repos\/[^/]+\/[^/]+\/deployments\/(\d+)\/statuses$/.exec(path);

      if (m && method === 'POST') {
        const deployment = this.deployments.find((d) => d.id === Number(m![1]) && d.repo === repo);
        if (!deployment) return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' }, {}, false);
        if (typeof json.description === 'string' && json.description.length > 140)
          return send(422, {
            message: 'Validation Failed',
            errors: [{ resource: 'DeploymentStatus', field: 'description', code: 'custom', message: 'description is too long (maximum is 140 characters)' }],
            documentation_url: 'https://docs.github.com/rest',
          });
        deployment.statuses.push(json);
        if (json.state === 'success' && json.auto_inactive !== false) this.#autoInactive(deployment);
        const id = this.#nextId++;
        const answer = {
          url: `${this.apiUrl}/repos/${repo}/deployments/${deployment.id}/statuses/${id}`,
          id,
          node_id: `DES_${id}`,
          state: String(json.state),
          creator: botUser(this.slug),
          description: String(json.description ?? ''),
          environment: deployment.body.environment as string,
          target_url: String(json.log_url ?? ''),
          log_url: String(json.log_url ?? ''),
          ...(json.environment_url ? { environment_url: String(json.environment_url) } : {}),
          created_at: now,
          updated_at: now,
          deployment_url: `${this.apiUrl}/repos/${repo}/deployments/${deployment.id}`,
          repository_url: `${this.apiUrl}/repos/${repo}`,
        };
        deployment.statusJson.push(answer);
        return send(201, answer);
      }
      m = /^\/repos\/[^/]+\/[^/]+\/statuses\/([0-9a-f]+)$/.exec(path);

      if (m && method === 'POST') {
        if (typeof json.description === 'string' && json.description.length > 140)
          return send(422, { message: 'Validation Failed', documentation_url: 'https://docs.github.com/rest' }, {}, false);
        const context = String(json.context ?? 'default');
        if (this.commitStatuses.filter((c) => c.repo === repo && c.sha === m![1] && c.body.context === context).length >= this.statusCap) {
          return send(
            422,
            {
              message: 'Validation Failed',
              errors: [{ resource: 'Status', code: 'custom', message: 'This SHA and context has reached the maximum number of statuses.' }],
              documentation_url: 'https://docs.github.com/rest',
            },
            {},
            false,
          );
        }
        const id = this.#nextId++;
        const entry = { repo, sha: m[1]!, body: json, json: null as unknown };
        this.commitStatuses.push(entry);
        entry.json = {
          url: `${this.apiUrl}/repos/${repo}/statuses/${m[1]}`,
          avatar_url: null,
          id,
          node_id: `SC_${id}`,
          state: String(json.state),
          description: (json.description as string | null) ?? null,
          target_url: (json.target_url as string | null) ?? null,
          context,
          created_at: now,
          updated_at: now,
          creator: botUser(this.slug),
        };
        return send(201, entry.json);
      }
    }
    send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' }, {}, false);
  }

  /** A new App made from `manifest`: the stand-in takes its identity (new id, slug, keys, secrets) and answers GitHub's conversion. */
  #becomeAppOf(manifest: Record<string, unknown>) {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.appId = String(100_000 + Math.floor(Math.random() * 800_000));
    this.slug = String(manifest.name ?? 'app')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '');
    this.clientId = `Iv1.${randomBytes(8).toString('hex')}`;
    this.clientSecret = randomBytes(20).toString('hex');
    this.privateKeyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    this.#publicKey = publicKey;
    this.webhookSecret = randomBytes(20).toString('hex');
    const organization = manifest.organization as string | null;
    const now = '2026-11-26T00:00:00Z';
    return {
      id: Number(this.appId),
      slug: this.slug,
      node_id: `A_${this.appId}`,
      owner: simpleUser(organization ?? 'octocat', 501, organization ? 'Organization' : 'User'),
      name: String(manifest.name ?? this.slug),
      description: (manifest.description as string | undefined) ?? null,
      external_url: String(manifest.url),
      html_url: `${this.url}/apps/${this.slug}`,
      created_at: now,
      updated_at: now,
      permissions: (manifest.default_permissions as Record<string, string> | undefined) ?? {},
      events: (manifest.default_events as string[] | undefined) ?? [],
      client_id: this.clientId,
      client_secret: this.clientSecret,
      webhook_secret: this.webhookSecret,
      pem: this.privateKeyPem,
    };
  }

  #checkRunJson(run: { id: number; repo: string; fields: Record<string, unknown> }) {
    const f = run.fields;
    const output = (f.output as Record<string, unknown> | undefined) ?? {};
    const status = String(f.status ?? (f.conclusion ? 'completed' : 'queued'));
    return {
      id: run.id,
      node_id: `CR_${run.id}`,
      head_sha: String(f.head_sha),
      name: String(f.name),
      url: `${this.apiUrl}/repos/${run.repo}/check-runs/${run.id}`,
      html_url: `${this.url}/${run.repo}/runs/${run.id}`,
      details_url: (f.details_url as string | undefined) ?? null,
      status,
      conclusion: (f.conclusion as string | undefined) ?? null,
      started_at: (f.started_at as string | undefined) ?? null,
      completed_at: (f.completed_at as string | undefined) ?? null,
      external_id: (f.external_id as string | undefined) ?? null,
      check_suite: { id: 1 },
      output: {
        title: (output.title as string | undefined) ?? null,
        summary: (output.summary as string | undefined) ?? null,
        text: (output.text as string | undefined) ?? null,
        annotations_count: 0,
        annotations_url: `${this.apiUrl}/repos/${run.repo}/check-runs/${run.id}/annotations`,
      },
      app: null,
      pull_requests: [],
    };
  }

  /** GitHub's App JWT rules: RS256 by the App's key, `iss` the App id, `exp` at most 10 minutes ahead, `iat` not in the future. */
  async #appJwtOk(authorization: string): Promise<boolean> {
    const jwt = /^Bearer (\S+)$/.exec(authorization)?.[1];
    if (!jwt) return false;
    try {
      const { payload } = await jwtVerify(jwt, this.#publicKey, { algorithms: ['RS256'], issuer: this.appId });
      const now = Math.floor(this.now() / 1000);
      return (
        typeof payload.exp === 'number' &&
        typeof payload.iat === 'number' &&
        payload.exp - now <= 600 &&
        payload.iat <= now + 5 &&
        payload.exp - payload.iat <= 660
      );
    } catch {
      return false;
    }
  }

  #installationJson(installation: Installation) {
    const now = '2026-11-26T00:00:00Z';
    return {
      id: installation.id,
      account: simpleUser(installation.account.login, installation.account.id, installation.account.type),
      repository_selection: 'selected',
      access_tokens_url: `${this.apiUrl}/app/installations/${installation.id}/access_tokens`,
      repositories_url: `${this.apiUrl}/installation/repositories`,
      html_url: `${this.url}/settings/installations/${installation.id}`,
      app_id: Number(this.appId),
      app_slug: this.slug,
      target_id: installation.account.id,
      target_type: installation.account.type,
      permissions: installation.permissions,
      events: ['push', 'pull_request'],
      created_at: now,
      updated_at: now,
      single_file_name: null,
      suspended_by: null,
      suspended_at: null,
    };
  }

  /** GitHub's full repository object (what an installation token's answer lists), every field GitHub's description requires. */
  #repositoryJson(fullName: string) {
    const [owner, name] = fullName.split('/') as [string, string];
    const id = this.repositoryId(fullName);
    const api = `${this.apiUrl}/repos/${fullName}`;
    const urls = Object.fromEntries(
      [
        'archive',
        'assignees',
        'blobs',
        'branches',
        'collaborators',
        'comments',
        'commits',
        'compare',
        'contents',
        'contributors',
        'deployments',
        'downloads',
        'events',
        'forks',
        'git_commits',
        'git_refs',
        'git_tags',
        'hooks',
        'issue_comment',
        'issue_events',
        'issues',
        'keys',
        'labels',
        'languages',
        'merges',
        'milestones',
        'notifications',
        'pulls',
        'releases',
        'stargazers',
        'statuses',
        'subscribers',
        'subscription',
        'tags',
        'teams',
        'trees',
      ].map((k) => [`${k}_url`, `${api}/${k}`]),
    );
    return {
      ...urls,
      id,
      node_id: `R_${id}`,
      name,
      full_name: fullName,
      owner: simpleUser(owner, 501, 'Organization'),
      private: true,
      html_url: `${this.url}/${fullName}`,
      description: null,
      fork: false,
      url: api,
      clone_url: `${this.url}/${fullName}.git`,
      git_url: `git://stand-in/${fullName}.git`,
      ssh_url: `git@stand-in:${fullName}.git`,
      svn_url: `${this.url}/${fullName}`,
      mirror_url: null,
      homepage: null,
      language: null,
      default_branch: 'main',
      forks: 0,
      forks_count: 0,
      open_issues: 0,
      open_issues_count: 0,
      stargazers_count: 0,
      watchers: 0,
      watchers_count: 0,
      size: 0,
      has_downloads: true,
      has_issues: true,
      has_projects: true,
      has_wiki: true,
      has_pages: false,
      archived: false,
      disabled: false,
      license: null,
      pushed_at: null,
      created_at: '2026-11-26T00:00:00Z',
      updated_at: '2026-11-26T00:00:00Z',
    };
  }

  /** git over HTTP: Basic auth with a token minted for this repository, then the real `git http-backend`. */
  #git(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const match = GIT_PATH.exec(url.pathname)!;
    const repo = `${match[1]}/${match[2]}`;
    const header = req.headers.authorization ?? '';
    const basic = /^Basic (\S+)$/.exec(header)?.[1];
    const password = basic ? Buffer.from(basic, 'base64').toString().split(':').slice(1).join(':') : '';
    const token = this.#tokens.get(password);
    const authorized = Boolean(
      token &&
        token.expiresAtMs > this.now() &&
        token.repositories.includes(repo) &&
        (token.permissions.contents === 'read' || token.permissions.contents === 'write'),
    );
    this.gitRequests.push({
      repo,
      authorized,
      hadAuthorization: header !== '',
      tokenRepositories: token?.repositories ?? null,
      tokenPermissions: token?.permissions ?? null,
    });
    if (!authorized) {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"' }).end();
      return;
    }
    gitHttpBackend(req, res, { projectRoot: this.reposRoot, pathInfo: `/${repo}.git${match[3]}`, query: url.search.slice(1), remoteUser: 'x-access-token' });
  }
}

const GIT_PATH = /^\/([^/]+)\/([^/]+?)(?:\.git)?(\/(?:info\/refs|git-upload-pack|git-receive-pack|HEAD|objects\/.*))$/;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function simpleUser(login: string, id: number, type: string) {
  const base = `https://api.github.com/users/${encodeURIComponent(login)}`;
  return {
    login,
    id,
    node_id: `U_${id}`,
    avatar_url: `https://avatars.githubusercontent.com/u/${id}`,
    gravatar_id: '',
    url: base,
    html_url: `https://github.com/${encodeURIComponent(login)}`,
    followers_url: `${base}/followers`,
    following_url: `${base}/following{/other_user}`,
    gists_url: `${base}/gists{/gist_id}`,
    starred_url: `${base}/starred{/owner}{/repo}`,
    subscriptions_url: `${base}/subscriptions`,
    organizations_url: `${base}/orgs`,
    repos_url: `${base}/repos`,
    events_url: `${base}/events{/privacy}`,
    received_events_url: `${base}/received_events`,
    type,
    site_admin: false,
  };
}

function botUser(slug: string) {
  return simpleUser(`${slug}[bot]`, 41898282, 'Bot');
}
