import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that build and run real LangGraph servers, drive a browser or kill servers on purpose
 * take 10–200 s each, against well under a second for most files. Started first, they run beside
 * the many short files instead of ending the run alone on one worker. vitest's own order (the
 * last run's durations when its cache has them, else the largest files first) holds within each
 * rank; without this, every `postgres` file would go before every `sqlite` one (projects sort by
 * name) and the slowest agent files would start last.
 */
const SLOW_FILES = [
  /\/test\/agents\//,
  /\/test\/console\/console-browser\./,
  /\/test\/github\/private-repo\./,
  /\/test\/fault\//,
  /\/test\/k8s\/k8s-agent-e2e\./,
  /\/test\/github\/pacing\./,
];

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const inVitestOrder = await super.sort(files);
    const rank = (file: TestSpecification) => (SLOW_FILES.some((pattern) => pattern.test(file.moduleId)) ? 0 : 1);
    return inVitestOrder
      .map((file, index) => ({ file, index }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.index - b.index)
      .map(({ file }) => file);
  }
}
