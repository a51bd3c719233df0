import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's chromium (`apt-get install chromium`; `.ci/run` installs it): playwright-core downloads no browser. */
export const CHROMIUM = '/usr/bin/chromium';

export function chromiumInstalled(): boolean {
  return existsSync(CHROMIUM);
}

/**
 * A headless Chromium that talks to nothing but the pages it is sent to: no background
 * networking, component updates, sync or QUIC. Playwright gives each launch a fresh temporary
 * profile (its own `--user-data-dir`) and each context an empty cookie jar.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export type AxeViolation = { id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> };

/**
 * axe-core's serious and critical violations on the page as it is now. The page's context needs
 * `bypassCSP: true`: the console's CSP refuses inline scripts, which is how axe is put in.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  // Browser code as text: the tests' TypeScript has no DOM types.
  const result = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as { violations: AxeViolation[] };
  return result.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map(({ id, impact, help, nodes }) => ({ id, impact, help, nodes: nodes.map(({ target }) => ({ target })) }));
}
