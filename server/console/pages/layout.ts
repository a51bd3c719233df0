import { type Html, h, postForm } from '../html.ts';

/** Which section of the navigation a page belongs to. */
export type Section = 'deployments' | 'listeners' | 'integrations' | 'api-keys' | 'trust' | 'workspaces' | 'none';

/** What every signed-in page's frame shows: the workspace, the navigation, sign-out. */
export type Frame = {
  csrf: string;
  workspaceName: string;
  organizationScoped: boolean;
};

const NAV: Array<[Exclude<Section, 'none' | 'workspaces'>, string, string]> = [
  ['deployments', '/console', 'Deployments'],
  ['listeners', '/console/listeners', 'Listeners'],
  ['integrations', '/console/integrations', 'GitHub integrations'],
  ['api-keys', '/console/api-keys', 'API keys'],
  ['trust', '/console/trust', 'Keyless trust'],
];

/**
 * A whole page. `live` is the address of the page's change stream (with the fingerprint it was
 * rendered at): the script re-fetches the page when it says so; without script the page is
 * complete as it is.
 */
export function page(input: { title: string; section: Section; frame?: Frame; live?: string; body: Html }): Html {
  const { frame } = input;
  return h`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${input.title} &middot; Control plane</title>
<link rel="stylesheet" href="/console/assets/console.css">
${input.live ? h`<script src="/console/assets/console.js" defer></script>` : ''}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/console">Control plane</a>
  ${
    frame
      ? h`<nav aria-label="Main"><ul>${NAV.map(
          ([section, href, text]) => h`<li><a href="${href}"${section === input.section ? h` aria-current="page"` : ''}>${text}</a></li>`,
        )}</ul></nav>
  <div class="who">
    ${frame.organizationScoped ? h`<a href="/console/workspaces" title="Choose a workspace">Workspace: ${frame.workspaceName}</a>` : h`<span>Workspace: ${frame.workspaceName}</span>`}
    ${postForm('/console/sign-out', frame.csrf, h`<button type="submit" class="link">Sign out</button>`)}
  </div>`
      : ''
  }
</header>
<main id="main"${input.live ? h` data-live="${input.live}"` : ''}>
<h1>${input.title}</h1>
${input.body}
</main>
</body>
</html>`;
}

/** A message at the top of a page: a problem (`role=alert`) or news (`role=status`). */
export function notice(kind: 'error' | 'ok', text: string | undefined): Html {
  if (!text) return h``;
  return kind === 'error' ? h`<p class="notice notice-error" role="alert">${text}</p>` : h`<p class="notice notice-ok" role="status">${text}</p>`;
}
