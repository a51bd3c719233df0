/** One sample of a Prometheus text exposition: its name, labels and value. */
export type Sample = { name: string; labels: Record<string, string>; value: number };

/**
 * Parses the Prometheus text format (version 0.0.4) as a scraper reads it: `# HELP` / `# TYPE`
 * lines name the families, every other line is one sample. Throws on a line it cannot read, so a
 * malformed exposition fails the test that reads it.
 */
export function parsePrometheus(text: string): { families: Map<string, string>; samples: Sample[] } {
  const families = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      families.set(type[1]!, type[2]!);
      continue;
    }
    if (line.startsWith('# HELP ')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|NaN|\+Inf|-Inf)$/.exec(line);
    if (!sample) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, raw] of (sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[key!] = raw!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    samples.push({ name: sample[1]!, labels, value: Number(sample[3]) });
  }
  return { families, samples };
}
