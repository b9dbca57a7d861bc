// Durations as PGX users write them, in one grammar for every surface: a Branch's `ttl`, `pgx db create
// --ttl`, the MCP tools' `ttl`. A duration is a sum of whole parts, each a number and a unit (s, m, h,
// d): 30s, 90m, 1h30m, 7d. Where a number of seconds is natural (a CLI flag, an MCP argument), a bare
// whole number is seconds too. A leaf: the operator, the CLI and the MCP server all import it.

/** A duration string; the operator's CRD schema uses the same pattern, so the cluster and PGX agree. */
export const DURATION = /^([0-9]+[smhd])+$/;

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds in a duration string such as `30s`, `2h`, `7d` or `1h30m`; null if it is not one. */
export function parseDuration(text: string): number | null {
  if (!DURATION.test(text)) return null;
  let ms = 0;
  for (const m of text.matchAll(/([0-9]+)([smhd])/g)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  return ms;
}

/** Seconds in a duration, or in a bare whole number of seconds (`3600`); null if it is neither. */
export function parseSeconds(text: string): number | null {
  const trimmed = text.trim();
  if (/^[0-9]+$/.test(trimmed)) return Number(trimmed);
  const ms = parseDuration(trimmed);
  return ms === null ? null : ms / 1000;
}

/** What a duration looks like, for messages and help: the same words on every surface. */
export const DURATION_EXAMPLES = '30s, 90m, 1h30m, 7d, or whole seconds';
