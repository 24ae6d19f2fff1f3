// Plain SVG charts (no library): a line over time, bars of a histogram, a reply's token
// timeline. Drawn with DOM calls only: every label is set as text, never parsed as markup.
const NS = 'http://www.w3.org/2000/svg';

function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(w, h, label) {
  return el('svg', { viewBox: `0 0 ${w} ${h}`, role: 'img', 'aria-label': label });
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// points: [{ t (ms since epoch), v }], drawn over the last windowMs.
export function lineChart(container, points, { windowMs = 300000, unit = '' } = {}) {
  const W = 400, H = 150, L = 34, B = 16;
  const s = svg(W, H, `line chart${unit ? ` in ${unit}` : ''}`);
  const now = Date.now();
  const max = niceMax(Math.max(0, ...points.map((p) => p.v)));
  for (let i = 0; i <= 4; i++) {
    const y = (H - B) * (1 - i / 4);
    s.append(el('line', { class: 'grid', x1: L, x2: W, y1: y, y2: y }));
    s.append(el('text', { x: 2, y: Math.max(8, y + 3) }, formatTick((max * i) / 4)));
  }
  for (let m = 0; m <= windowMs / 60000; m++) {
    const x = L + ((W - L) * (windowMs - m * 60000)) / windowMs;
    s.append(el('text', { x: Math.min(W - 18, Math.max(L, x - 8)), y: H - 3 }, m === 0 ? 'now' : `-${m}m`));
  }
  const xy = points.filter((p) => now - p.t <= windowMs).map((p) => [L + ((W - L) * (windowMs - (now - p.t))) / windowMs, (H - B) * (1 - p.v / max)]);
  if (xy.length > 1) {
    const d = xy.map(([x, y], i) => `${i ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`).join('');
    s.append(el('path', { class: 'area', d: `${d}L${xy[xy.length - 1][0].toFixed(1)},${H - B}L${xy[0][0].toFixed(1)},${H - B}Z` }));
    s.append(el('path', { class: 'line', d }));
  }
  container.replaceChildren(s);
}

function formatTick(v) {
  if (v === 0) return '0';
  if (v >= 1000) return `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)}k`;
  return v >= 10 ? String(Math.round(v)) : v.toFixed(1);
}

function formatSeconds(s) {
  if (!Number.isFinite(s)) return '+Inf';
  if (s < 0.001) return `${+(s * 1e6).toPrecision(3)}µs`;
  if (s < 1) return `${+(s * 1000).toPrecision(3)}ms`;
  return `${+s.toPrecision(3)}s`;
}

// bins: [{ lo, hi, count }] (seconds); empty bins at both ends are left out.
export function barChart(container, bins, { label = 'histogram' } = {}) {
  const W = 400, H = 150, B = 16;
  let first = bins.findIndex((b) => b.count > 0);
  let last = bins.length - 1 - [...bins].reverse().findIndex((b) => b.count > 0);
  const s = svg(W, H, label);
  if (first < 0) {
    s.append(el('text', { x: W / 2 - 40, y: H / 2 }, 'no observations yet'));
    container.replaceChildren(s);
    return;
  }
  first = Math.max(0, first - 1);
  last = Math.min(bins.length - 1, last + 1);
  const shown = bins.slice(first, last + 1);
  const max = Math.max(...shown.map((b) => b.count));
  const bw = W / shown.length;
  shown.forEach((b, i) => {
    const h = ((H - B - 10) * b.count) / max;
    const r = el('rect', { class: 'bar', x: i * bw + 1, y: H - B - h, width: Math.max(1, bw - 2), height: h });
    r.append(el('title', {}, `${formatSeconds(b.lo)} – ${formatSeconds(b.hi)}: ${b.count}`));
    s.append(r);
    if (b.count > 0) s.append(el('text', { x: i * bw + 2, y: H - B - h - 2 }, String(b.count)));
    if (i % Math.ceil(shown.length / 6) === 0) s.append(el('text', { x: i * bw + 1, y: H - 3 }, `≤${formatSeconds(b.hi)}`));
  });
  container.replaceChildren(s);
}

// One tick per streamed token at its arrival (ms since sending), the wait for the first token
// shaded: a stall shows as a gap.
export function timeline(arrivals, { ttftMs } = {}) {
  const W = 600, H = 26;
  const total = Math.max(1, arrivals.length ? arrivals[arrivals.length - 1] : 0);
  const s = svg(W, H, `token arrivals over ${Math.round(total)} ms`);
  s.setAttribute('class', 'timeline');
  s.append(el('line', { class: 'axis', x1: 0, x2: W, y1: H - 9, y2: H - 9 }));
  const first = Number.isFinite(ttftMs) ? ttftMs : arrivals[0];
  if (Number.isFinite(first)) s.append(el('rect', { class: 'ttft', x: 0, y: 0, width: Math.min(W, (W * first) / total), height: H - 9 }));
  // Many tokens: one path instead of thousands of elements.
  let d = '';
  for (const a of arrivals) {
    const x = ((W - 1) * a) / total + 0.5;
    d += `M${x.toFixed(1)},1V${H - 10}`;
  }
  if (d) s.append(el('path', { class: 'tick', d }));
  s.append(el('text', { x: 1, y: H - 1 }, '0'));
  s.append(el('text', { x: W - 42, y: H - 1 }, formatSeconds(total / 1000)));
  return s;
}
