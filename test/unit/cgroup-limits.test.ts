import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILD_CPU_WEIGHT, Cgroup } from '../../agent/cgroups.ts';

/**
 * The files a command's cgroup is made with, on plain folders laid out as the kernel's hierarchies
 * (simulated: the agent tests read the real ones). The CPU weight is what keeps a neighbour's build
 * from taking a server's turn: a fifth of the default on both versions.
 */
describe('a cgroup’s limits', () => {
  const limits = { memoryMb: 256, pidsMax: 128, cpus: 1.5 };
  const read = (dir: string, file: string) => readFileSync(join(dir, file), 'utf8');

  it('v2: memory.max, pids.max, cpu.max, and cpu.weight (100 for servers, less for builds)', () => {
    const root = mkdtempSync(join(tmpdir(), 'cp-cgroup-v2-'));
    new Cgroup({ version: 2, root }, 'server', limits);
    new Cgroup({ version: 2, root }, 'build', { ...limits, cpuWeight: BUILD_CPU_WEIGHT });
    expect(read(join(root, 'server'), 'memory.max')).toBe(String(256 * 1024 * 1024));
    expect(read(join(root, 'server'), 'pids.max')).toBe('128');
    expect(read(join(root, 'server'), 'cpu.max')).toBe('150000 100000');
    expect(read(join(root, 'server'), 'cpu.weight')).toBe('100');
    expect(read(join(root, 'build'), 'cpu.weight')).toBe(String(BUILD_CPU_WEIGHT));
  });

  it('v1: the same in each controller’s hierarchy, the weight as cpu.shares (1024 the default)', () => {
    const base = mkdtempSync(join(tmpdir(), 'cp-cgroup-v1-'));
    const roots = { memory: join(base, 'memory'), pids: join(base, 'pids'), cpu: join(base, 'cpu') };
    for (const dir of Object.values(roots)) mkdirSync(dir);
    new Cgroup({ version: 1, roots }, 'server', limits);
    new Cgroup({ version: 1, roots }, 'build', { ...limits, cpuWeight: BUILD_CPU_WEIGHT });
    expect(read(join(roots.memory, 'cp-agent', 'server'), 'memory.limit_in_bytes')).toBe(String(256 * 1024 * 1024));
    expect(read(join(roots.pids, 'cp-agent', 'server'), 'pids.max')).toBe('128');
    expect(read(join(roots.cpu, 'cp-agent', 'server'), 'cpu.cfs_quota_us')).toBe('150000');
    expect(read(join(roots.cpu, 'cp-agent', 'server'), 'cpu.shares')).toBe('1024');
    expect(read(join(roots.cpu, 'cp-agent', 'build'), 'cpu.shares')).toBe(String(Math.round((BUILD_CPU_WEIGHT * 1024) / 100)));
  });
});
