import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';

type Validating = { validate(): void };

/** The kinds the agent renders, reads or documents, each with its schema from `kubernetes-models`. */
// Each model takes its own kind's shape; the caller's object is checked by the model, not by the type.
const MODELS: Record<string, (data: any) => Validating> = {
  'v1/Secret': (d) => new Secret(d),
  'v1/Service': (d) => new Service(d),
  'v1/ServiceAccount': (d) => new ServiceAccount(d),
  'v1/PersistentVolumeClaim': (d) => new PersistentVolumeClaim(d),
  'v1/Pod': (d) => new Pod(d),
  'v1/Namespace': (d) => new Namespace(d),
  'apps/v1/Deployment': (d) => new Deployment(d),
  'apps/v1/StatefulSet': (d) => new StatefulSet(d),
  'autoscaling/v2/HorizontalPodAutoscaler': (d) => new HorizontalPodAutoscaler(d),
  'networking.k8s.io/v1/NetworkPolicy': (d) => new NetworkPolicy(d),
  'rbac.authorization.k8s.io/v1/Role': (d) => new Role(d),
  'rbac.authorization.k8s.io/v1/RoleBinding': (d) => new RoleBinding(d),
};

/** Whether a schema is known here for this apiVersion and kind. */
export function hasSchema(apiVersion: string, kind: string): boolean {
  return `${apiVersion}/${kind}` in MODELS;
}

/**
 * Checks an object against the Kubernetes schema of its kind (the OpenAPI schemas of
 * `kubernetes-models`); answers null when it conforms, else a sentence naming each field broken.
 */
export function schemaErrors(object: { apiVersion?: unknown; kind?: unknown; [field: string]: unknown }): string | null {
  const key = `${String(object.apiVersion)}/${String(object.kind)}`;
  const model = MODELS[key];
  if (!model) return `no schema is known for ${key}`;
  try {
    model(object).validate();
    return null;
  } catch (error) {
    return (error instanceof Error ? error.message : String(error))
      .replace(/^data\//, '')
      .replaceAll(', data/', ', ')
      .replaceAll('data/', '');
  }
}
