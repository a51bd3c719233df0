import type { SourceMap } from 'node:module';

/**
 * With `--enable-source-maps` (as `npm start` runs the bundle), stack traces through the server
 * script's source map: Node maps the frames of the modules it loads itself, not those of a
 * `vm.Script` (server/bundle-entry.ts), which `module.findSourceMap` does not know. So the entry
 * formats stacks itself then, as Node does: the script's frames at their TypeScript source, the
 * others as V8 writes them. The map (5 MB) is read at the first stack formatted, not at start.
 * Without the flag, nothing changes: stacks give the script's positions, as a bare `node main.js`
 * always did.
 */
export function mapScriptStacks(scriptPath: string): void {
  if (!process.sourceMapsEnabled) return;
  const { readFileSync } = process.getBuiltinModule('node:fs');
  const { SourceMap } = process.getBuiltinModule('node:module');
  const { fileURLToPath, pathToFileURL } = process.getBuiltinModule('node:url');
  const mapUrl = pathToFileURL(`${scriptPath}.map`);
  let map: SourceMap | null | undefined;
  const loadMap = () => {
    try {
      return new SourceMap(JSON.parse(readFileSync(mapUrl, 'utf8')));
    } catch {
      return null;
    }
  };
  const frame = (site: NodeJS.CallSite): string => {
    const line = site.getLineNumber();
    const column = site.getColumnNumber();
    if (site.getFileName() !== scriptPath || line === null || column === null) return `${site}`;
    const entry = (map ??= loadMap())?.findEntry(line - 1, column - 1);
    if (!entry || !('originalSource' in entry)) return `${site}`;
    const file = fileURLToPath(new URL(entry.originalSource, mapUrl));
    const position = `${file}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
    const name = site.getFunctionName() ?? site.getMethodName();
    const prefix = `${site.isAsync() ? 'async ' : ''}${site.isConstructor() ? 'new ' : ''}`;
    return name ? `${prefix}${name} (${position})` : `${prefix}${position}`;
  };
  Error.prepareStackTrace = (error, sites) => [String(error), ...sites.map((site) => `    at ${frame(site)}`)].join('\n');
}
