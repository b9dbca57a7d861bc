// What the `pgx` commands print for a person: aligned tables, JSON as is for --json, counts whose noun
// agrees (1 session, 2 sessions) and short durations.

/** `value` as indented JSON on stdout: what --json prints (the API's JSON as is). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Rows as aligned columns under a header; an empty list prints `empty` instead. */
export function printTable(header: string[], rows: string[][], empty: string): void {
  if (rows.length === 0) {
    process.stdout.write(`${empty}\n`);
    return;
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
  process.stdout.write(`${[header, ...rows].map(line).join('\n')}\n`);
}

/** `n` and the noun in agreement: 1 session, 2 sessions, 0 processes. */
export function count(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}

/** Seconds as a short human duration: 42s, 5m 3s, 2h 10m, 3d 4h. */
export function humanDuration(totalSeconds: number): string {
  const s = Math.max(0, Math.floor(totalSeconds));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${sec}s`;
  return `${sec}s`;
}
