// What the CRD generator needs to know about a kind beyond its spec and status schemas: names, short
// names, printer columns and the rules on metadata.name (which an OpenAPI schema cannot express, so they
// become CEL rules at the root, as Kubernetes allows for metadata.name).

import type { z } from 'zod';

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  /** 0 shows in `kubectl get`; 1 only with `-o wide`. */
  priority?: number;
}

export interface CustomResourceKind {
  kind: string;
  /** The resource name in URLs: runtimes, templates, branches. */
  plural: string;
  singular: string;
  /** What an object of this kind is, for `kubectl explain`. */
  description: string;
  shortNames: string[];
  /** The object's name must be a DNS-1123 label of at most this many characters. */
  maxNameLength: number;
  /** Why the name is limited that way, for the refusal message. */
  nameLimitReason: string;
  /** What the name must look like (RE2-compatible: it becomes a CEL rule), and that in words. */
  namePattern: RegExp;
  namePatternWords: string;
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: PrinterColumn[];
}
