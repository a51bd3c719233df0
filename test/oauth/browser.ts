/**
 * A minimal browser: follows redirects by hand, keeps cookies per origin, and submits the
 * provider's login and consent forms (or presses "Cancel" on the consent page). It stops at the
 * first redirect to `stopAt` and answers that URL, so a test decides how to deliver it.
 */
export class Browser {
  readonly #cookies = new Map<string, Map<string, string>>();
  readonly pagesSeen: string[] = [];

  async authorize(startUrl: string, stopAt: string, options: { login?: string; deny?: boolean } = {}): Promise<URL> {
    let request: { url: string; method: 'GET' | 'POST'; body?: string } = { url: startUrl, method: 'GET' };
    for (let hop = 0; hop < 20; hop++) {
      if (request.url.startsWith(stopAt)) return new URL(request.url);
      const response = await this.#fetch(request);
      const location = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && location) {
        request = { url: new URL(location, request.url).toString(), method: 'GET' };
        continue;
      }
      const html = await response.text();
      if (response.status !== 200) throw new Error(`provider answered ${response.status} at ${request.url}: ${html.slice(0, 500)}`);
      const form = parseForm(html);
      if (!form) throw new Error(`no form on page ${request.url}: ${html.slice(0, 500)}`);
      this.pagesSeen.push(form.fields.prompt ?? 'unknown');
      if (form.fields.prompt === 'login') {
        request = {
          url: new URL(form.action, request.url).toString(),
          method: 'POST',
          body: new URLSearchParams({ ...form.fields, login: options.login ?? 'alice', password: 'any' }).toString(),
        };
      } else if (form.fields.prompt === 'consent' && options.deny) {
        const abort = /<a href="([^"]*\/abort)"/.exec(html)?.[1];
        if (!abort) throw new Error('no cancel link on the consent page');
        request = { url: new URL(decodeEntities(abort), request.url).toString(), method: 'GET' };
      } else {
        request = { url: new URL(form.action, request.url).toString(), method: 'POST', body: new URLSearchParams(form.fields).toString() };
      }
    }
    throw new Error('too many redirects');
  }

  async #fetch(request: { url: string; method: 'GET' | 'POST'; body?: string }): Promise<Response> {
    const url = new URL(request.url);
    const jar = this.#cookies.get(url.origin) ?? new Map<string, string>();
    const headers: Record<string, string> = {};
    if (jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (request.body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetch(url, { method: request.method, headers, body: request.body, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') jar.delete(name);
      else jar.set(name, value);
    }
    this.#cookies.set(url.origin, jar);
    return response;
  }
}

function parseForm(html: string): { action: string; fields: Record<string, string> } | null {
  const form = /<form[^>]*action="([^"]*)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) return null;
  const fields: Record<string, string> = {};
  for (const input of form[2]!.matchAll(/<input[^>]*type="hidden"[^>]*>/gi)) {
    const name = /name="([^"]*)"/.exec(input[0])?.[1];
    const value = /value="([^"]*)"/.exec(input[0])?.[1] ?? '';
    if (name) fields[name] = decodeEntities(value);
  }
  return { action: decodeEntities(form[1]!), fields };
}

function decodeEntities(text: string): string {
  return text
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)))
    .replace(/&#x([0-9a-f]+);/gi, (_, n: string) => String.fromCharCode(parseInt(n, 16)))
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}
