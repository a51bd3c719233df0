import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SERVER = resolve(import.meta.dirname, '../../server');

/** Every TypeScript file under a folder of server/, with the server-relative paths it imports. */
function importsUnder(folder: string): Array<{ file: string; imported: string[] }> {
  const root = join(SERVER, folder);
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => {
      const path = join(root, name);
      const text = readFileSync(path, 'utf8');
      const specifiers = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);
      const imported = specifiers.filter((s) => s.startsWith('.')).map((s) => relative(SERVER, resolve(path, '..', s)));
      return { file: relative(SERVER, path), imported };
    });
}

function offending(folder: string, forbidden: string[]): string[] {
  return importsUnder(folder).flatMap(({ file, imported }) =>
    imported.filter((target) => forbidden.some((f) => target.startsWith(`${f}/`))).map((target) => `${file} imports ${target}`),
  );
}

// Data flows one way, route → domain → store, and http/ is plumbing the routes use: an import
// against that direction makes a lower layer depend on what is built on it.
describe('imports follow the layers', () => {
  it('http/ imports no route', () => {
    expect(offending('http', ['routes'])).toEqual([]);
  });

  it('domain/ imports neither http/ nor routes/', () => {
    expect(offending('domain', ['http', 'routes'])).toEqual([]);
  });

  it('store/ imports neither domain/, http/ nor routes/', () => {
    expect(offending('store', ['domain', 'http', 'routes'])).toEqual([]);
  });

  it('finds an import when there is one (the scan itself works)', () => {
    // routes/ does import http/ and domain/, which is the allowed direction.
    expect(offending('routes', ['http']).length).toBeGreaterThan(0);
    expect(offending('routes', ['domain']).length).toBeGreaterThan(0);
  });
});
