import { currentTraceparent } from '../lib/request-scope.ts';
import type { Metrics } from '../metrics.ts';
import type { Tracing } from '../tracing.ts';
import { type GithubApi, GithubApiError, type GithubRequest } from './github-api.ts';

/**
 * Counts every request `api` makes to GitHub by its outcome (`acp_github_requests_total`) and,
 * with tracing on, gives each a client span (OpenTelemetry's HTTP client conventions: method,
 * URL, server, status; never a header, so never a token), child of the work that made it. Around
 * the API client rather than inside it, so the client stays about GitHub alone.
 */
export function countGithubRequests(api: GithubApi, metrics: Pick<Metrics, 'githubRequest'>, tracing?: Tracing): GithubApi {
  const request = api.request.bind(api);
  const counted = async <T>(call: GithubRequest): Promise<T> => {
    try {
      const answer = await request<T>(call);
      metrics.githubRequest('ok');
      return answer;
    } catch (error) {
      metrics.githubRequest(outcomeOf(error));
      throw error;
    }
  };
  api.request = tracing ? <T>(call: GithubRequest) => tracedCall<T>(tracing, api.app.apiUrl, call, () => counted<T>(call)) : counted;
  return api;
}

function tracedCall<T>(tracing: Tracing, apiUrl: string, call: GithubRequest, send: () => Promise<T>): Promise<T> {
  const url = new URL(`${apiUrl}${call.path}`);
  const attributes = {
    'http.request.method': call.method,
    'url.full': `${url.origin}${url.pathname}`,
    'server.address': url.hostname,
    'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
  };
  // A refusal's status is on the span; a success's exact 2xx is not (the client answers the body only).
  return tracing.inSpan(call.method, { kind: 'client', parent: currentTraceparent(), attributes }, async (span) => {
    try {
      return await send();
    } catch (error) {
      if (error instanceof GithubApiError) span.set({ 'http.response.status_code': error.status });
      throw error;
    }
  });
}

function outcomeOf(error: unknown): 'client_error' | 'server_error' | 'rate_limited' | 'network_error' {
  if (!(error instanceof GithubApiError)) return 'network_error';
  if (error.status === 429 || (error.status === 403 && error.headers.get('x-ratelimit-remaining') === '0')) return 'rate_limited';
  return error.status >= 500 ? 'server_error' : 'client_error';
}
