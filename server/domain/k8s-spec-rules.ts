import type { ResourceSpec } from '../../shared/schemas/resource-spec.ts';
import type { ListenerRecord } from '../store/types.ts';
import { ValidationFailed } from './errors.ts';

type Issue = { loc: Array<string | number>; msg: string; type: string };

/** The secret names that let a LangGraph image start (its license check). */
const LICENSE_SECRETS = ['LANGGRAPH_CLOUD_LICENSE_KEY', 'LANGSMITH_API_KEY'];

/** PostgreSQL's claim size when the spec gives none (agent/k8s/render.ts renders the same default). */
const DEFAULT_DB_STORAGE_GI = 10;

/** A label or annotation key's name part, and a label value (k8s.io/apimachinery `validation.IsQualifiedName`). */
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** The API server's limit on all of an object's annotations together. */
const ANNOTATIONS_MAX_BYTES = 256 * 1024;

/**
 * What Kubernetes, or a LangGraph image on it, would refuse in a deployment on a `k8s` listener
 * (contract §18), found before any agent sees it: a 422 naming each field. `previous` is the spec
 * stored before a PATCH (null at create).
 */
export function refuseWhatK8sWouldNot(
  listener: ListenerRecord,
  input: { spec: ResourceSpec | null; secrets: ReadonlyArray<{ name: string }>; previous: ResourceSpec | null; creating: boolean },
): void {
  if (listener.compute_type !== 'k8s') return;
  const issues: Issue[] = [];
  const at = (field: string | Array<string | number>) => ['body', 'source_config', 'resource_spec', ...[field].flat()];
  const spec = input.spec ?? {};

  if (!listener.compute_config.k8s_license_secret && !input.secrets.some((s) => LICENSE_SECRETS.includes(s.name))) {
    issues.push({
      loc: ['body', 'secrets'],
      msg: `A deployment on a k8s listener needs LANGGRAPH_CLOUD_LICENSE_KEY or LANGSMITH_API_KEY among its secrets (the image does not start without one), or a listener whose compute_config.k8s_license_secret names a Secret holding it`,
      type: 'value_error',
    });
  }
  if (spec.min_scale === 0) {
    issues.push({
      loc: at('min_scale'),
      msg: 'min_scale must be at least 1 on a k8s listener: a LangGraph server scaled to 0 answers nothing',
      type: 'value_error',
    });
  }
  if (!input.creating && input.previous !== null && (spec.db_storage_gi ?? DEFAULT_DB_STORAGE_GI) !== (input.previous.db_storage_gi ?? DEFAULT_DB_STORAGE_GI)) {
    issues.push({
      loc: at('db_storage_gi'),
      msg: `db_storage_gi cannot change (${input.previous.db_storage_gi ?? DEFAULT_DB_STORAGE_GI} → ${spec.db_storage_gi ?? DEFAULT_DB_STORAGE_GI}): Kubernetes refuses changes to a StatefulSet's volume claim template; resize the PersistentVolumeClaim by hand`,
      type: 'value_error',
    });
  }
  if (!listener.compute_config.k8s_allow_privileged) {
    for (const list of ['init_containers', 'sidecars'] as const) {
      (spec[list] ?? []).forEach((container, index) => {
        if (container.securityContext != null) {
          issues.push({
            loc: at([list, index, 'securityContext']),
            msg: `${list}[${index}].securityContext is refused: pods run under Pod Security "restricted"; a listener with compute_config.k8s_allow_privileged allows a container's own`,
            type: 'value_error',
          });
        }
      });
    }
  }
  checkMetadata(spec.labels, 'labels', at, issues);
  checkMetadata(spec.annotations, 'annotations', at, issues);
  if (issues.length) throw new ValidationFailed(issues);
}

/** Label and annotation keys (and label values) as the Kubernetes API server accepts them. */
function checkMetadata(
  map: Record<string, string> | null | undefined,
  field: 'labels' | 'annotations',
  at: (f: Array<string | number>) => Array<string | number>,
  issues: Issue[],
): void {
  if (!map) return;
  let bytes = 0;
  for (const [key, value] of Object.entries(map)) {
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
    const slash = key.lastIndexOf('/');
    const prefix = slash >= 0 ? key.slice(0, slash) : null;
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    const keyProblem =
      prefix !== null && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))
        ? 'its prefix must be a DNS subdomain (lower case, at most 253 characters)'
        : name.length > 63 || !QUALIFIED_NAME.test(name)
          ? 'its name must be at most 63 characters of A-Z, a-z, 0-9, -, _ and ., starting and ending with a letter or digit'
          : null;
    if (keyProblem) issues.push({ loc: at([field, key]), msg: `${field} key '${key}' is not valid in Kubernetes: ${keyProblem}`, type: 'value_error' });
    if (field === 'labels' && value !== '' && (value.length > 63 || !QUALIFIED_NAME.test(value))) {
      issues.push({
        loc: at([field, key]),
        msg: `label value of '${key}' is not valid in Kubernetes: at most 63 characters of A-Z, a-z, 0-9, -, _ and ., starting and ending with a letter or digit (or empty)`,
        type: 'value_error',
      });
    }
  }
  if (field === 'annotations' && bytes > ANNOTATIONS_MAX_BYTES) {
    issues.push({ loc: at([field]), msg: `annotations total ${bytes} bytes; Kubernetes accepts at most ${ANNOTATIONS_MAX_BYTES}`, type: 'value_error' });
  }
}
