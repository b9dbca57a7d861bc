// A plain-text table for the terminal: columns padded, numbers right-aligned.

export function formatTable(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)));
  const numeric = (s: string): boolean => /^[-+]?[\d.,]+\s*[a-z%x]*$/i.test(s);
  const line = (r: string[]): string =>
    r.map((cell, c) => (c > 0 && numeric(cell) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** A Markdown table with the same cells. */
export function markdownTable(header: string[], rows: string[][]): string {
  const row = (r: string[]): string => `| ${r.join(' | ')} |`;
  return [row(header), row(header.map((_, c) => (c === 0 ? '---' : '---:'))), ...rows.map(row)].join('\n');
}
