// A grid of small bar charts, one panel per workload with its own scale, written as plain SVG text.
// Workloads differ by orders of magnitude (a scan in seconds, -C in hundreds of tps, -S in tens of
// thousands), so one shared axis would hide every difference that matters.

export interface Bar {
  label: string;
  value: number;
  color: string;
}

export interface Panel {
  title: string;
  /** Shown under the title, e.g. "tps, higher is better". */
  subtitle: string;
  bars: Bar[];
  format(value: number): string;
  /** Top of the scale; default the largest bar. Panels that compare with each other share one. */
  max?: number;
}

const PANEL_W = 250;
const PANEL_H = 180;
const PAD = 14;
const TOP = 44;
const BOTTOM = 26;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function panel(p: Panel, x0: number, y0: number): string {
  const out: string[] = [];
  out.push(`<g transform="translate(${x0},${y0})">`);
  out.push(`<rect x="0.5" y="0.5" width="${PANEL_W - 1}" height="${PANEL_H - 1}" fill="#fff" stroke="#ddd"/>`);
  out.push(`<text x="${PANEL_W / 2}" y="17" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`);
  out.push(`<text x="${PANEL_W / 2}" y="32" text-anchor="middle" fill="#666" font-size="11">${esc(p.subtitle)}</text>`);
  const max = p.max ?? Math.max(...p.bars.map((b) => (Number.isFinite(b.value) ? b.value : 0)), 1e-9);
  const plotH = PANEL_H - TOP - BOTTOM;
  const slot = (PANEL_W - 2 * PAD) / p.bars.length;
  const barW = slot * 0.62;
  const base = PANEL_H - BOTTOM;
  out.push(`<line x1="${PAD}" y1="${base}" x2="${PANEL_W - PAD}" y2="${base}" stroke="#999"/>`);
  p.bars.forEach((b, i) => {
    const h = Number.isFinite(b.value) ? (b.value / max) * (plotH - 14) : 0;
    const x = PAD + i * slot + (slot - barW) / 2;
    const cx = x + barW / 2;
    out.push(`<rect x="${x.toFixed(1)}" y="${(base - h).toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}" fill="${b.color}"/>`);
    out.push(`<text x="${cx.toFixed(1)}" y="${(base - h - 4).toFixed(1)}" text-anchor="middle" font-size="11">${esc(p.format(b.value))}</text>`);
    out.push(`<text x="${cx.toFixed(1)}" y="${base + 15}" text-anchor="middle" font-size="11" fill="#333">${esc(b.label)}</text>`);
  });
  out.push('</g>');
  return out.join('\n');
}

export function panelGrid(title: string, panels: Panel[], columns: number): string {
  const rows = Math.ceil(panels.length / columns);
  const gap = 10;
  const head = 34;
  const width = columns * PANEL_W + (columns + 1) * gap;
  const height = head + rows * PANEL_H + (rows + 1) * gap;
  const body = panels.map((p, i) => panel(p, gap + (i % columns) * (PANEL_W + gap), head + gap + Math.floor(i / columns) * (PANEL_H + gap)));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fafafa"/>`,
    `<text x="${gap}" y="24" font-size="15" font-weight="bold">${esc(title)}</text>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}
