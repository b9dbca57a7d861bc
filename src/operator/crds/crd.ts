// A kind's CustomResourceDefinition (apiextensions.k8s.io/v1) from its zod schemas and kind.ts facts.

import { GROUP, VERSION } from './common.js';
import type { CustomResourceKind } from './kind.js';
import { structuralSchema, type JsonObject } from './openapi.js';

export function customResourceDefinition(k: CustomResourceKind): JsonObject {
  const root: JsonObject = {
    description: k.description,
    type: 'object',
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.' },
      kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.' },
      metadata: { type: 'object' },
      spec: structuralSchema(k.spec),
      status: structuralSchema(k.status),
    },
    // Kubernetes checks a custom object's name as a DNS subdomain only; ours become labels and database
    // names, so the name rules are CEL rules at the root (the only place metadata.name can be checked).
    'x-kubernetes-validations': [
      { rule: `self.metadata.name.size() <= ${k.maxNameLength}`, message: `a ${k.kind} name must be at most ${k.maxNameLength} characters: ${k.nameLimitReason}` },
      { rule: `self.metadata.name.matches('${k.namePattern.source}')`, message: `a ${k.kind} name must be ${k.namePatternWords}` },
    ],
  };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${k.plural}.${GROUP}`, labels: { 'app.kubernetes.io/name': 'pgx', 'app.kubernetes.io/component': 'crd' } },
    spec: {
      group: GROUP,
      names: { kind: k.kind, listKind: `${k.kind}List`, plural: k.plural, singular: k.singular, shortNames: k.shortNames, categories: ['pgx'] },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: root },
          subresources: { status: {} },
          additionalPrinterColumns: k.printerColumns.map((c) => ({ ...c }) as JsonObject),
        },
      ],
    },
  };
}
