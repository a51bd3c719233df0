/** Something that answers requests in process: a Hono app (`app.request`). */
type InProcess = { request(path: string, init: RequestInit): Response | Promise<Response> };

/**
 * Calls a listener-agent route in process with a listener token (or anything else as the bearer,
 * or none); answers the status and the parsed JSON body (null for a 204).
 */
export function agentCall(app: InProcess, listenerId: string, token: string | null, path: string, body?: unknown, method = 'POST') {
  return Promise.resolve(
    app.request(`/v2/listeners/${listenerId}/agent${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  ).then(async (response) => ({ status: response.status, body: response.status === 204 ? null : ((await response.json()) as any) }));
}
