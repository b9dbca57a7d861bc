// A small YAML writer for the generated CRDs: block style, two-space indent, strings plain where YAML
// reads them back as the same string and double-quoted (JSON escapes, which YAML shares) otherwise.
// Enough for JSON-shaped data; it never has to read YAML (tests read it back with the `yaml` package).

import type { Json } from './openapi.js';

/** Plain scalars YAML 1.1 or 1.2 would read as something other than a string, or that need care. */
const SPECIAL = /^(?:true|false|yes|no|on|off|y|n|null|~|[-+]?(?:\.inf|\.nan)|[-+]?[0-9._]+(?:e[-+]?[0-9]+)?|0x[0-9a-f]+|0o[0-7]+)$/i;
const PLAIN = /^[A-Za-z0-9_./][A-Za-z0-9_ ./()'=-]*$/;

function scalar(v: string | number | boolean | null): string {
  if (v === null) return 'null';
  if (typeof v !== 'string') return String(v);
  return PLAIN.test(v) && !SPECIAL.test(v) && !v.endsWith(' ') ? v : JSON.stringify(v);
}

function isEmptyCollection(v: Json): boolean {
  return (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);
}

function inline(v: Json): string {
  if (Array.isArray(v)) return '[]';
  if (typeof v === 'object' && v !== null) return '{}';
  return scalar(v);
}

function lines(v: Json, indent: string): string[] {
  if (Array.isArray(v)) {
    return v.flatMap((item) => {
      if (typeof item !== 'object' || item === null || isEmptyCollection(item)) return [`${indent}- ${inline(item)}`];
      const [first, ...rest] = lines(item, `${indent}  `);
      return [`${indent}- ${first!.slice(indent.length + 2)}`, ...rest];
    });
  }
  if (typeof v === 'object' && v !== null) {
    return Object.entries(v).flatMap(([key, value]) => {
      const k = scalar(key);
      if (typeof value !== 'object' || value === null || isEmptyCollection(value)) return [`${indent}${k}: ${inline(value)}`];
      return [`${indent}${k}:`, ...lines(value, Array.isArray(value) ? indent : `${indent}  `)];
    });
  }
  return [`${indent}${scalar(v)}`];
}

/** One YAML document for a JSON value (an object or list at the top). */
export function toYaml(value: Json): string {
  return lines(value, '').join('\n') + '\n';
}
