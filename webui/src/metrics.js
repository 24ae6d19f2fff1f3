// The Prometheus text exposition format (0.0.4), as /metrics serves it, and the few
// computations the engine view needs: sums over label sets, histograms, their change between
// two polls, and quantiles as PromQL's histogram_quantile computes them.

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL = /[a-zA-Z_][a-zA-Z0-9_]*/y;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

// Go's strconv.ParseFloat, which Prometheus uses: decimal floats, Inf/Infinity, NaN.
function parseValue(s) {
  if (/^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/.test(s)) return Number(s);
  const m = /^([+-]?)(inf|infinity)$/i.exec(s);
  if (m) return m[1] === '-' ? -Infinity : Infinity;
  if (/^nan$/i.test(s)) return NaN;
  return undefined;
}

// HELP text: \\ is a backslash and \n a newline; any other backslash stays as it is.
function unescapeHelp(s) {
  return s.replace(/\\([\\n])/g, (_, c) => (c === 'n' ? '\n' : '\\'));
}

// One sample line: { name, labels, value, timestamp? } or null when malformed.
function parseSample(line) {
  const nm = NAME.exec(line);
  if (!nm) return null;
  const name = nm[0];
  let i = name.length;
  const labels = {};
  const skip = () => { while (line[i] === ' ' || line[i] === '\t') i++; };
  skip();
  if (line[i] === '{') {
    i++;
    for (;;) {
      skip();
      if (line[i] === '}') { i++; break; } // also after a trailing comma
      LABEL.lastIndex = i;
      const lm = LABEL.exec(line);
      if (!lm) return null;
      const key = lm[0];
      i += key.length;
      skip();
      if (line[i] !== '=') return null;
      i++;
      skip();
      if (line[i] !== '"') return null;
      i++;
      let v = '';
      for (;;) {
        const c = line[i];
        if (c === undefined) return null;
        if (c === '"') { i++; break; }
        if (c === '\\') {
          const e = line[i + 1];
          if (e === '\\') v += '\\';
          else if (e === '"') v += '"';
          else if (e === 'n') v += '\n';
          else return null;
          i += 2;
          continue;
        }
        v += c;
        i++;
      }
      if (Object.prototype.hasOwnProperty.call(labels, key)) return null; // a label twice
      labels[key] = v;
      skip();
      if (line[i] === ',') { i++; continue; }
      if (line[i] === '}') { i++; break; }
      return null;
    }
  }
  const rest = line.slice(i).trim().split(/[ \t]+/);
  if (rest.length < 1 || rest.length > 2 || rest[0] === '') return null;
  const value = parseValue(rest[0]);
  if (value === undefined) return null;
  const sample = { name, labels, value };
  if (rest.length === 2) {
    if (!/^-?\d+$/.test(rest[1])) return null;
    sample.timestamp = Number(rest[1]); // milliseconds since the epoch
  }
  return sample;
}

// -> { samples: Map<name, [{ labels, value, timestamp? }]>, types: Map<name, type>,
//      help: Map<name, string>, errors }. Samples are keyed by their full name: a histogram X
// has X_bucket, X_sum and X_count. A malformed line is skipped and counted; it never throws.
export function parsePrometheus(text) {
  const samples = new Map(), types = new Map(), help = new Map();
  let errors = 0;
  for (const raw of String(text == null ? '' : text).split('\n')) {
    let end = raw.length;
    while (end > 0 && (raw[end - 1] === ' ' || raw[end - 1] === '\t' || raw[end - 1] === '\r')) end--;
    const line = raw.slice(0, end).replace(/^[ \t]+/, '');
    if (line === '') continue;
    if (line[0] === '#') {
      const m = /^#[ \t]+(HELP|TYPE)[ \t]+([^ \t]+)(?:[ \t]+([^]*))?$/.exec(line);
      if (!m) continue; // any other comment
      const [, kind, name, rest = ''] = m;
      if (!NAME.test(name) || NAME.exec(name)[0] !== name) { errors++; continue; }
      if (kind === 'HELP') help.set(name, unescapeHelp(rest));
      else if (TYPES.has(rest)) types.set(name, rest);
      else errors++;
      continue;
    }
    const s = parseSample(line);
    if (!s) { errors++; continue; }
    let list = samples.get(s.name);
    if (!list) samples.set(s.name, (list = []));
    const { name, ...sample } = s;
    list.push(sample);
  }
  return { samples, types, help, errors };
}

function matches(labels, match) {
  for (const k in match) if (labels[k] !== String(match[k])) return false;
  return true;
}

// The sum of name's samples whose labels include all of match; 0 when there are none. A NaN
// sample is left out of the sum, so the result is never NaN.
export function metricValue(parsed, name, match = {}) {
  const list = parsed && parsed.samples.get(name);
  if (!list) return 0;
  let sum = 0;
  for (const s of list) if (!Number.isNaN(s.value) && matches(s.labels, match)) sum += s.value;
  return Number.isNaN(sum) ? 0 : sum; // +Inf + -Inf
}

// Whether name has samples; for a histogram or summary's base name, whether its _count does.
export function hasMetric(parsed, name) {
  if (!parsed) return false;
  const has = (n) => (parsed.samples.get(n) || []).length > 0;
  return has(name) || (['histogram', 'summary'].includes(parsed.types.get(name)) && has(`${name}_count`));
}

// baseName's histogram over the label sets that include match, bucket counts summed per le:
// { buckets: [{ le, count }] (cumulative, by le, the last le Infinity), sum, count }, or null
// when there are no such buckets.
export function histogram(parsed, baseName, match = {}) {
  const list = parsed && parsed.samples.get(`${baseName}_bucket`);
  if (!list) return null;
  const byLe = new Map();
  for (const s of list) {
    if (!matches(s.labels, match) || s.labels.le === undefined) continue;
    const le = parseValue(s.labels.le);
    if (le === undefined || Number.isNaN(le) || Number.isNaN(s.value)) continue;
    byLe.set(le, (byLe.get(le) || 0) + s.value); // "1" and "1.0" are the same bucket
  }
  if (byLe.size === 0) return null;
  const buckets = [...byLe].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
  const count = parsed.samples.has(`${baseName}_count`)
    ? metricValue(parsed, `${baseName}_count`, match)
    : buckets[buckets.length - 1].count;
  if (buckets[buckets.length - 1].le !== Infinity) buckets.push({ le: Infinity, count }); // required, but be lenient
  return { buckets, sum: metricValue(parsed, `${baseName}_sum`, match), count };
}

// The observations between two polls of the same histogram: now minus before, bucket by bucket.
// before null: now. When a count went down (the server restarted), now: it counts from zero.
export function histogramDelta(now, before) {
  if (!now || !before) return now;
  const prev = new Map(before.buckets.map((b) => [b.le, b.count]));
  const buckets = [];
  for (const b of now.buckets) {
    const p = prev.get(b.le) || 0;
    if (b.count < p) return now;
    buckets.push({ le: b.le, count: b.count - p });
  }
  if (now.count < before.count) return now;
  return { buckets, sum: now.sum - before.sum, count: now.count - before.count };
}

// The q-quantile (0 <= q <= 1) as PromQL's histogram_quantile estimates it: linear within the
// bucket the rank falls in, from 0 for the first bucket (when its le > 0); in the +Inf bucket,
// the highest finite le. NaN when there are no observations. One deviation: for q = 0 it gives
// the lower bound of the first non-empty bucket, where PromQL may give NaN.
export function histogramQuantile(q, h) {
  if (!h || Number.isNaN(q)) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const bs = h.buckets;
  if (bs.length < 2 || bs[bs.length - 1].le !== Infinity) return NaN;
  // cumulative counts should not go down; where they do (label sets with different buckets,
  // a scrape between updates), take the running maximum, as PromQL does
  const cum = [];
  let max = 0;
  for (const b of bs) cum.push((max = Math.max(max, b.count)));
  const total = cum[cum.length - 1];
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let b = 0;
  while (b < bs.length - 1 && !(cum[b] >= rank && cum[b] > 0)) b++;
  if (b === bs.length - 1) return bs[bs.length - 2].le;
  if (b === 0 && bs[0].le <= 0) return bs[0].le;
  const start = b > 0 ? bs[b - 1].le : 0;
  const below = b > 0 ? cum[b - 1] : 0;
  return start + (bs[b].le - start) * ((rank - below) / (cum[b] - below));
}

// Per-bucket (not cumulative) counts for a bar chart: [{ lo, hi, count }], lo of the first
// bucket 0 (or -Infinity when its le is not above 0), hi of the last Infinity.
export function bucketCounts(h) {
  if (!h) return [];
  const out = [];
  let lo = h.buckets.length && h.buckets[0].le > 0 ? 0 : -Infinity, prev = 0;
  for (const b of h.buckets) {
    out.push({ lo, hi: b.le, count: Math.max(0, b.count - prev) });
    lo = b.le;
    prev = Math.max(prev, b.count);
  }
  return out;
}
