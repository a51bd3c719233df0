import type { Metrics } from '../metrics.ts';
import { type GithubApi, GithubApiError } from './github-api.ts';

/**
 * Counts every request `api` makes to GitHub by its outcome (`acp_github_requests_total`), around
 * the API client rather than inside it, so the client stays about GitHub alone.
 */
export function countGithubRequests(api: GithubApi, metrics: Pick<Metrics, 'githubRequest'>): GithubApi {
  const request = api.request.bind(api);
  api.request = async <T>(...args: Parameters<GithubApi['request']>): Promise<T> => {
    try {
      const answer = await request<T>(...args);
      metrics.githubRequest('ok');
      return answer;
    } catch (error) {
      metrics.githubRequest(outcomeOf(error));
      throw error;
    }
  };
  return api;
}

function outcomeOf(error: unknown): 'client_error' | 'server_error' | 'rate_limited' | 'network_error' {
  if (!(error instanceof GithubApiError)) return 'network_error';
  if (error.status === 429 || (error.status === 403 && error.headers.get('x-ratelimit-remaining') === '0')) return 'rate_limited';
  return error.status >= 500 ? 'server_error' : 'client_error';
}
