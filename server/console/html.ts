import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { repositoryOnHost } from '../../shared/repo-url.ts';

/** A piece of HTML whose interpolated values have been escaped. */
export type Html = HtmlEscapedString;

/**
 * HTML with every interpolated value escaped (Hono's `html` tag). Pages are plain `.ts` so that
 * `npm run start:dev` (Node's type stripping, which does not read `.tsx`) runs them as they are;
 * nothing interpolated here is ever a promise, so the result is always synchronous.
 */
export function h(strings: TemplateStringsArray, ...values: unknown[]): Html {
  return html(strings, ...values) as Html;
}

export { raw };

/** A timestamp as people read it, in UTC, with the exact value for machines and tooltips. */
export function time(timestamp: string | null | undefined): Html {
  if (!timestamp) return h`<span class="muted">&mdash;</span>`;
  const shown = `${timestamp.slice(0, 10)} ${timestamp.slice(11, 19)} UTC`;
  return h`<time datetime="${timestamp}">${shown}</time>`;
}

/** How long from `start` to `end`, as "1 m 12 s". */
export function duration(start: string, end: string): string {
  const seconds = Math.max(0, Math.round((Date.parse(end) - Date.parse(start)) / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} m ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} m`;
}

const STATUS_TONES: Record<string, string> = {
  DEPLOYED: 'ok',
  READY: 'ok',
  CREATE_FAILED: 'bad',
  BUILD_FAILED: 'bad',
  DEPLOY_FAILED: 'bad',
  UNKNOWN: 'bad',
  INTERRUPTED: 'quiet',
  SKIPPED: 'quiet',
  UNUSED: 'quiet',
  AWAITING_DELETE: 'quiet',
};

/** A status as a badge; its text is the status itself, so colour is never the only sign. */
export function status(value: string | null | undefined): Html {
  if (!value) return h`<span class="muted">&mdash;</span>`;
  return h`<span class="badge badge-${STATUS_TONES[value] ?? 'busy'}">${value}</span>`;
}

/** "Previous" / "Next" links of a paginated list (`more`: whether a next page exists). */
export function pager(basePath: string, params: Record<string, string | undefined>, offset: number, limit: number, more: boolean): Html {
  if (offset === 0 && !more) return h``;
  const link = (to: number) => {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) if (value) query.set(name, value);
    if (to > 0) query.set('offset', String(to));
    const text = query.toString();
    return text ? `${basePath}?${text}` : basePath;
  };
  return h`<nav class="pager" aria-label="Pages">
    ${offset > 0 ? h`<a href="${link(Math.max(0, offset - limit))}" rel="prev">&larr; Previous</a>` : h`<span></span>`}
    <span class="muted">${offset + 1}&ndash;${offset + limit}</span>
    ${more ? h`<a href="${link(offset + limit)}" rel="next">Next &rarr;</a>` : h`<span></span>`}
  </nav>`;
}

/** A state-changing form: POST, with the session's CSRF token. */
export function postForm(action: string, csrf: string, body: Html, className = 'inline'): Html {
  return h`<form method="post" action="${action}" class="${className}"><input type="hidden" name="csrf" value="${csrf}">${body}</form>`;
}

/** A link to a repository's page on GitHub, or the URL as text when it is not a GitHub web URL. */
export function githubRepoLink(repoUrl: string | null, githubWebUrl: string): Html {
  if (!repoUrl) return h`<span class="muted">&mdash;</span>`;
  const web = githubWebPath(repoUrl, githubWebUrl);
  return web ? h`<a href="${web}">${web.slice(githubWebUrl.length + 1)}</a>` : h`<code>${repoUrl}</code>`;
}

/** `https://github.com/owner/repo` for a repository URL on `githubWebUrl`'s host (https, ssh or scp forms); null otherwise. */
export function githubWebPath(repoUrl: string, githubWebUrl: string): string | null {
  const repository = repositoryOnHost(repoUrl, githubWebUrl);
  return repository ? `${githubWebUrl}/${repository.owner}/${repository.name}` : null;
}
