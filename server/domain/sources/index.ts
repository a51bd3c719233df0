import type { DeploymentCreate } from '../../../shared/schemas/deployment.ts';
import { externalDockerSource } from './external-docker.ts';
import { githubSource } from './github.ts';
import { internalDockerSource, internalSourceSource } from './internal.ts';
import type { CreateContext, PlannedCreate, SourceModule, SourceName } from './source-module.ts';

/** Every source's module, by its name. */
export const SOURCES: { [S in SourceName]: SourceModule<S> } = {
  github: githubSource,
  external_docker: externalDockerSource,
  internal_source: internalSourceSource,
  internal_docker: internalDockerSource,
};

/** Plans a create with its source's module: the body stays the narrowed member of the union all the way. */
export function planSourceCreate(body: DeploymentCreate, context: CreateContext): Promise<PlannedCreate> {
  switch (body.source) {
    case 'github':
      return SOURCES.github.planCreate(body, context);
    case 'external_docker':
      return SOURCES.external_docker.planCreate(body, context);
    case 'internal_source':
      return SOURCES.internal_source.planCreate(body, context);
    case 'internal_docker':
      return SOURCES.internal_docker.planCreate(body, context);
  }
}
