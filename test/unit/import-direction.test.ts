import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
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

/** The folders of server/ (its root files are the wiring, which may import any of them). */
function serverFolders(): string[] {
  return readdirSync(SERVER, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
}

/** folder → folder it imports → the imports that make the edge (`file imports target`). */
function folderGraph(folders: string[]): Map<string, Map<string, string[]>> {
  const graph = new Map<string, Map<string, string[]>>();
  for (const folder of folders) {
    const edges = new Map<string, string[]>();
    for (const { file, imported } of importsUnder(folder)) {
      for (const target of imported) {
        const to = target.split(sep)[0]!;
        if (to === folder || !folders.includes(to)) continue;
        edges.set(to, [...(edges.get(to) ?? []), `${file} imports ${target}`]);
      }
    }
    graph.set(folder, edges);
  }
  return graph;
}

/** Each cycle between folders, once, as `a → b → a` with the imports that close it. */
function folderCycles(graph: Map<string, Map<string, string[]>>): string[] {
  const cycles = new Set<string>();
  const walk = (start: string, at: string, path: string[]) => {
    for (const next of graph.get(at)?.keys() ?? []) {
      if (next === start) {
        // One name per cycle: rotated to start at its smallest folder.
        const smallest = path.indexOf([...path].sort()[0]!);
        const rotated = [...path.slice(smallest), ...path.slice(0, smallest)];
        const steps = rotated.map((from, i) => {
          const to = rotated[(i + 1) % rotated.length]!;
          return `${from} → ${to} (${graph.get(from)!.get(to)![0]})`;
        });
        cycles.add(steps.join('; '));
      } else if (!path.includes(next) && next > start) {
        walk(start, next, [...path, next]);
      }
    }
  };
  for (const folder of graph.keys()) walk(folder, folder, [folder]);
  return [...cycles].sort();
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

  it('no folder of server/ imports, directly or through others, a folder that imports it', () => {
    // A cycle makes two folders one layer: neither can be understood, tested or moved alone.
    expect(folderCycles(folderGraph(serverFolders()))).toEqual([]);
  });

  it('features/ is the top of server/: no other folder imports it (only the composition at the root does)', () => {
    const importers = [...folderGraph(serverFolders()).entries()].flatMap(([, edges]) => edges.get('features') ?? []);
    expect(importers).toEqual([]);
  });

  it('lib/ is the bottom of server/: it imports no other folder of it', () => {
    expect([...(folderGraph(serverFolders()).get('lib')?.values() ?? [])].flat()).toEqual([]);
  });

  it('finds an import when there is one (the scan itself works)', () => {
    // routes/ does import http/ and domain/, which is the allowed direction.
    expect(offending('routes', ['http']).length).toBeGreaterThan(0);
    expect(offending('routes', ['domain']).length).toBeGreaterThan(0);
    expect(
      folderCycles(
        new Map([
          ['a', new Map([['b', ['a/x.ts imports b/y.ts']]])],
          ['b', new Map([['a', ['b/y.ts imports a/x.ts']]])],
        ]),
      ),
    ).toEqual(['a → b (a/x.ts imports b/y.ts); b → a (b/y.ts imports a/x.ts)']);
  });
});
