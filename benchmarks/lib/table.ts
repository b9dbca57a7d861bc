// A plain-text table for the terminal: columns padded, numbers right-aligned.

export function formatTable(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)));
  const numeric = (s: string): boolean => /^[-+]?[\d.,]+\s*[a-z%x]*$/i.test(s);
  const line = (r: string[]): string =>
    r.map((cell, c) => (c > 0 && numeric(cell) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** A Markdown table with the same cells; `align` per column, 'l' or 'r' (default: first left, rest right). */
export function markdownTable(header: string[], rows: string[][], align?: ('l' | 'r')[]): string {
  const row = (r: string[]): string => `| ${r.join(' | ')} |`;
  const rule = header.map((_, c) => ((align?.[c] ?? (c === 0 ? 'l' : 'r')) === 'l' ? '---' : '---:'));
  return [row(header), row(rule), ...rows.map(row)].join('\n');
}
