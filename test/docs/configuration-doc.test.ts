import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Config } from '../../server/config.ts';
import { CONFIGURATION_DOC, renderConfigurationDoc, renderSettingsTable } from '../../server/configuration-doc.ts';

// The configuration page is generated from the schema the server parses its environment with, so
// CI fails when a setting is added, removed or re-described without regenerating the page.
describe('docs/configuration.md', () => {
  it('is what `npm run docs:config` generates from server/config.ts', () => {
    const doc = readFileSync(CONFIGURATION_DOC, 'utf8');
    expect(renderConfigurationDoc(doc), 'docs/configuration.md is out of date: run `npm run docs:config` and commit it').toBe(doc);
  });

  it('has one row per setting the server reads, with the default an operator would write', () => {
    const table = renderSettingsTable();
    const names = [...table.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((match) => match[1]);
    expect(names).toEqual(Object.keys(Config.shape));
    // Defaults before the schema's transforms: what goes in the environment, not the parsed value.
    expect(table).toContain('| `RECONCILE_ALLOWED_HOSTS` | `github.com` |');
    expect(table).toContain('| `ALLOW_FILE_REPO_URLS` | `false` |');
    expect(table).toContain('| `HEALTH_PORT` | unset |');
    expect(table).toContain(`| \`PORT\` | \`${Config.parse({}).PORT}\` |`);
  });
});
