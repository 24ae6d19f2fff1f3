import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bucketCounts, hasMetric, histogram, histogramDelta, histogramQuantile, metricValue, parsePrometheus } from '../src/metrics.js';

// The server's bucket bounds for latencies (src/server/metrics.cpp), printed as fmt prints them.
const LATENCY = ['0.0005', '0.001', '0.0025', '0.005', '0.01', '0.02', '0.04', '0.06', '0.08', '0.1', '0.25', '0.5', '0.75',
  '1', '2.5', '5', '7.5', '10', '20', '40', '80', '160', '640', '2560'];

// A histogram's lines as the server prints them; counts: cumulative, one per LATENCY bound
// (the last repeated to the end and for +Inf).
function histLines(name, labels, counts, sum) {
  const lines = [];
  const at = (i) => counts[Math.min(i, counts.length - 1)];
  LATENCY.forEach((le, i) => lines.push(`${name}_bucket{${labels},le="${le}"} ${at(i)}`));
  lines.push(`${name}_bucket{${labels},le="+Inf"} ${at(LATENCY.length)}`);
  lines.push(`${name}_sum{${labels}} ${sum}`);
  lines.push(`${name}_count{${labels}} ${at(LATENCY.length)}`);
  return lines.join('\n');
}

const M = 'model_name="stories260K"';
const FIXTURE = `# HELP lumen_num_requests_running Requests being computed (sequences, n > 1 counts each).
# TYPE lumen_num_requests_running gauge
lumen_num_requests_running{${M}} 2
# HELP lumen_num_requests_waiting Requests waiting to be scheduled.
# TYPE lumen_num_requests_waiting gauge
lumen_num_requests_waiting{${M}} 0
# HELP lumen_kv_cache_usage_perc Fraction of the KV cache blocks in use (1 = full).
# TYPE lumen_kv_cache_usage_perc gauge
lumen_kv_cache_usage_perc{${M}} 0.125
# HELP lumen_engine_generated_tokens_total Tokens sampled so far, counted as they are made (lumen_generation_tokens_total counts finished completions).
# TYPE lumen_engine_generated_tokens_total counter
lumen_engine_generated_tokens_total{${M}} 1234
# HELP lumen_request_success_total Finished completions by finish reason (abort: the client went away).
# TYPE lumen_request_success_total counter
lumen_request_success_total{${M},finished_reason="abort"} 1
lumen_request_success_total{${M},finished_reason="error"} 0
lumen_request_success_total{${M},finished_reason="length"} 4
lumen_request_success_total{${M},finished_reason="stop"} 3
# HELP lumen_http_requests_total HTTP responses by status code.
# TYPE lumen_http_requests_total counter
lumen_http_requests_total{status="200"} 17
lumen_http_requests_total{status="404"} 2
# HELP lumen_time_to_first_token_seconds Time from submission to the first generated token.
# TYPE lumen_time_to_first_token_seconds histogram
${histLines('lumen_time_to_first_token_seconds', M, [0, 1, 3, 4, 5], 0.0123)}
# HELP lumen_inter_token_latency_seconds Time between consecutive generated tokens.
# TYPE lumen_inter_token_latency_seconds histogram
${histLines('lumen_inter_token_latency_seconds', M, [0], 0)}
`;

const close = (actual, expected, what) => assert.ok(Math.abs(actual - expected) < 1e-12, `${what}: ${actual} != ${expected}`);

test('parses what the server prints', () => {
  const p = parsePrometheus(FIXTURE);
  assert.equal(p.errors, 0);
  assert.deepEqual(p.samples.get('lumen_num_requests_running'), [{ labels: { model_name: 'stories260K' }, value: 2 }]);
  assert.equal(p.types.get('lumen_num_requests_running'), 'gauge');
  assert.equal(p.types.get('lumen_request_success_total'), 'counter');
  assert.equal(p.types.get('lumen_time_to_first_token_seconds'), 'histogram');
  assert.equal(p.help.get('lumen_num_requests_running'), 'Requests being computed (sequences, n > 1 counts each).');
  assert.equal(p.samples.get('lumen_time_to_first_token_seconds_bucket').length, 25);
  assert.deepEqual(p.samples.get('lumen_time_to_first_token_seconds_bucket')[0], { labels: { model_name: 'stories260K', le: '0.0005' }, value: 0 });
  assert.deepEqual(p.samples.get('lumen_time_to_first_token_seconds_bucket')[24], { labels: { model_name: 'stories260K', le: '+Inf' }, value: 5 });
  assert.deepEqual(p.samples.get('lumen_time_to_first_token_seconds_sum'), [{ labels: { model_name: 'stories260K' }, value: 0.0123 }]);
  assert.equal(p.samples.has('lumen_time_to_first_token_seconds'), false);
});

test('metricValue sums the samples whose labels match', () => {
  const p = parsePrometheus(FIXTURE);
  assert.equal(metricValue(p, 'lumen_num_requests_running'), 2);
  assert.equal(metricValue(p, 'lumen_kv_cache_usage_perc'), 0.125);
  assert.equal(metricValue(p, 'lumen_request_success_total'), 8);
  assert.equal(metricValue(p, 'lumen_request_success_total', { finished_reason: 'stop' }), 3);
  assert.equal(metricValue(p, 'lumen_request_success_total', { finished_reason: 'stop', model_name: 'stories260K' }), 3);
  assert.equal(metricValue(p, 'lumen_request_success_total', { finished_reason: 'stop', model_name: 'other' }), 0);
  assert.equal(metricValue(p, 'lumen_http_requests_total'), 19);
  assert.equal(metricValue(p, 'lumen_http_requests_total', { status: 200 }), 17); // a number matches its string
  assert.equal(metricValue(p, 'lumen_http_requests_total', { model_name: 'stories260K' }), 0); // no such label
  assert.equal(metricValue(p, 'lumen_no_such_metric'), 0);
  assert.equal(metricValue(p, 'lumen_time_to_first_token_seconds_count'), 5);
  assert.equal(metricValue(null, 'x'), 0);
});

test('hasMetric', () => {
  const p = parsePrometheus(FIXTURE);
  assert.equal(hasMetric(p, 'lumen_num_requests_running'), true);
  assert.equal(hasMetric(p, 'lumen_time_to_first_token_seconds'), true); // a histogram's base name
  assert.equal(hasMetric(p, 'lumen_time_to_first_token_seconds_bucket'), true);
  assert.equal(hasMetric(p, 'lumen_spec_decode_num_draft_tokens_total'), false);
  assert.equal(hasMetric(parsePrometheus('# TYPE x gauge\n'), 'x'), false);
});

test('histogram: cumulative buckets by le, sum and count', () => {
  const p = parsePrometheus(FIXTURE);
  const h = histogram(p, 'lumen_time_to_first_token_seconds');
  assert.equal(h.buckets.length, 25);
  assert.deepEqual(h.buckets.slice(0, 6), [
    { le: 0.0005, count: 0 }, { le: 0.001, count: 1 }, { le: 0.0025, count: 3 }, { le: 0.005, count: 4 }, { le: 0.01, count: 5 }, { le: 0.02, count: 5 },
  ]);
  assert.deepEqual(h.buckets[24], { le: Infinity, count: 5 });
  assert.equal(h.sum, 0.0123);
  assert.equal(h.count, 5);
  assert.equal(histogram(p, 'lumen_num_requests_running'), null);
  assert.equal(histogram(p, 'lumen_nothing'), null);
  assert.equal(histogram(p, 'lumen_time_to_first_token_seconds', { model_name: 'other' }), null);
  assert.equal(histogram(null, 'x'), null);
});

test('histogram sums label sets per le, "1" and "1.0" being one bucket', () => {
  const p = parsePrometheus(`
h_bucket{m="a",le="0.5"} 1
h_bucket{m="a",le="1"} 2
h_bucket{m="a",le="+Inf"} 3
h_sum{m="a"} 4.5
h_count{m="a"} 3
h_bucket{m="b",le="1.0"} 10
h_bucket{m="b",le="0.5"} 5
h_bucket{m="b",le="+Inf"} 10
h_sum{m="b"} 6
h_count{m="b"} 10
`);
  assert.equal(p.errors, 0);
  assert.deepEqual(histogram(p, 'h'), { buckets: [{ le: 0.5, count: 6 }, { le: 1, count: 12 }, { le: Infinity, count: 13 }], sum: 10.5, count: 13 });
  assert.deepEqual(histogram(p, 'h', { m: 'b' }), { buckets: [{ le: 0.5, count: 5 }, { le: 1, count: 10 }, { le: Infinity, count: 10 }], sum: 6, count: 10 });
});

test('histogramQuantile interpolates as PromQL does (values worked by hand)', () => {
  const h = histogram(parsePrometheus(FIXTURE), 'lumen_time_to_first_token_seconds');
  // counts: <=0.0005: 0, <=0.001: 1, <=0.0025: 3, <=0.005: 4, <=0.01: 5
  close(histogramQuantile(0.5, h), 0.001 + 0.0015 * (1.5 / 2), 'p50'); // rank 2.5, in (0.001, 0.0025]
  close(histogramQuantile(0.9, h), 0.005 + 0.005 * (0.5 / 1), 'p90'); // rank 4.5, in (0.005, 0.01]
  close(histogramQuantile(0.1, h), 0.0005 + 0.0005 * (0.5 / 1), 'p10'); // rank 0.5, in (0.0005, 0.001]
  close(histogramQuantile(1, h), 0.01, 'p100');
  close(histogramQuantile(0.6, h), 0.0025, 'p60'); // rank 3: exactly the top of (0.001, 0.0025]
  close(histogramQuantile(0, h), 0.0005, 'p0'); // the lower bound of the first non-empty bucket
  assert.equal(histogramQuantile(-0.1, h), -Infinity);
  assert.equal(histogramQuantile(1.1, h), Infinity);
  assert.ok(Number.isNaN(histogramQuantile(NaN, h)));
});

test('histogramQuantile: first bucket from 0, the +Inf bucket, no observations', () => {
  const mk = (pairs) => ({ buckets: pairs.map(([le, count]) => ({ le, count })), sum: 0, count: pairs[pairs.length - 1][1] });
  close(histogramQuantile(0.5, mk([[1, 4], [2, 4], [Infinity, 4]])), 0.5, 'from 0 in the first bucket');
  close(histogramQuantile(0.25, mk([[10, 8], [Infinity, 8]])), 2.5, 'a quarter of the first bucket');
  assert.equal(histogramQuantile(0.5, mk([[1, 1], [2, 2], [Infinity, 10]])), 2, 'in +Inf: the highest finite le');
  assert.equal(histogramQuantile(0.99, mk([[1, 0], [2, 0], [Infinity, 3]])), 2);
  assert.equal(histogramQuantile(0.25, mk([[-1, 2], [0, 4], [1, 8], [Infinity, 8]])), -1, 'first le <= 0: that le');
  close(histogramQuantile(0.75, mk([[-1, 2], [0, 4], [1, 8], [Infinity, 8]])), 0.5, 'above 0');
  assert.ok(Number.isNaN(histogramQuantile(0.5, mk([[1, 0], [Infinity, 0]]))), 'no observations');
  assert.ok(Number.isNaN(histogramQuantile(0.5, histogram(parsePrometheus(FIXTURE), 'lumen_inter_token_latency_seconds'))));
  assert.ok(Number.isNaN(histogramQuantile(0.5, mk([[Infinity, 3]]))), 'only +Inf');
  assert.ok(Number.isNaN(histogramQuantile(0.5, null)));
  // counts that go down (label sets with different bounds) are taken as their running maximum
  close(histogramQuantile(0.5, mk([[1, 4], [2, 3], [3, 8], [Infinity, 8]])), 1, 'monotonic');
});

test('histogramDelta: the observations between two polls', () => {
  const before = histogram(parsePrometheus(FIXTURE), 'lumen_time_to_first_token_seconds');
  const nowText = FIXTURE.replace(histLines('lumen_time_to_first_token_seconds', M, [0, 1, 3, 4, 5], 0.0123),
    histLines('lumen_time_to_first_token_seconds', M, [0, 1, 3, 6, 8, 8, 9], 0.5123));
  const now = histogram(parsePrometheus(nowText), 'lumen_time_to_first_token_seconds');
  const d = histogramDelta(now, before);
  assert.deepEqual(d.buckets.slice(0, 7).map((b) => b.count), [0, 0, 0, 2, 3, 3, 4]);
  assert.deepEqual(d.buckets[24], { le: Infinity, count: 4 });
  close(d.sum, 0.5, 'sum');
  assert.equal(d.count, 4);
  close(histogramQuantile(0.5, d), 0.0025 + 0.0025 * (2 / 2), 'p50 of the delta'); // rank 2, in (0.0025, 0.005]
  assert.notEqual(d, now);
  assert.equal(histogramDelta(now, null), now);
  assert.equal(histogramDelta(null, before), null);
  // nothing new
  const zero = histogramDelta(now, now);
  assert.equal(zero.count, 0);
  assert.ok(zero.buckets.every((b) => b.count === 0));
  assert.ok(Number.isNaN(histogramQuantile(0.5, zero)));
});

test('histogramDelta after a server restart is the new histogram', () => {
  const big = histogram(parsePrometheus(histLines('x', M, [0, 5, 10, 20], 3)), 'x');
  const small = histogram(parsePrometheus(histLines('x', M, [0, 1, 1, 2], 0.1)), 'x');
  assert.equal(histogramDelta(small, big), small);
  // only the count went down
  const c = structuredClone(big);
  c.count = 1;
  assert.equal(histogramDelta(c, big), c);
});

test('bucketCounts: per-bucket counts for a bar chart', () => {
  const h = histogram(parsePrometheus(FIXTURE), 'lumen_time_to_first_token_seconds');
  const b = bucketCounts(h);
  assert.equal(b.length, 25);
  assert.deepEqual(b.slice(0, 6), [
    { lo: 0, hi: 0.0005, count: 0 }, { lo: 0.0005, hi: 0.001, count: 1 }, { lo: 0.001, hi: 0.0025, count: 2 },
    { lo: 0.0025, hi: 0.005, count: 1 }, { lo: 0.005, hi: 0.01, count: 1 }, { lo: 0.01, hi: 0.02, count: 0 },
  ]);
  assert.deepEqual(b[24], { lo: 2560, hi: Infinity, count: 0 });
  assert.equal(b.reduce((s, x) => s + x.count, 0), 5);
  assert.deepEqual(bucketCounts({ buckets: [{ le: -1, count: 1 }, { le: Infinity, count: 3 }], sum: 0, count: 3 }),
    [{ lo: -Infinity, hi: -1, count: 1 }, { lo: -1, hi: Infinity, count: 2 }]);
  assert.deepEqual(bucketCounts(null), []);
});

test('label value escapes, and HELP escapes', () => {
  const p = parsePrometheus([
    '# HELP esc A help with a backslash \\\\ and a\\nnewline, and \\t kept.',
    'esc{path="C:\\\\dir\\\\",quote="say \\"hi\\"",nl="a\\nb",odd="x} y, z=\\"w\\""} 1',
  ].join('\n'));
  assert.equal(p.errors, 0);
  assert.equal(p.help.get('esc'), 'A help with a backslash \\ and a\nnewline, and \\t kept.');
  assert.deepEqual(p.samples.get('esc')[0].labels, { path: 'C:\\dir\\', quote: 'say "hi"', nl: 'a\nb', odd: 'x} y, z="w"' });
});

test('values: NaN, infinities, exponents; timestamps', () => {
  const p = parsePrometheus([
    'a NaN', 'b +Inf', 'c -Inf', 'd 1.5e3', 'e -2.5E-3', 'f 1e+06', 'g .5', 'h 7.', 'i Inf', 'j -0',
    'k{x="1"} 3 1700000000000', 'l 4 -5',
  ].join('\n'));
  assert.equal(p.errors, 0);
  const v = (n) => p.samples.get(n)[0].value;
  assert.ok(Number.isNaN(v('a')));
  assert.equal(v('b'), Infinity);
  assert.equal(v('c'), -Infinity);
  assert.equal(v('d'), 1500);
  assert.equal(v('e'), -0.0025);
  assert.equal(v('f'), 1e6);
  assert.equal(v('g'), 0.5);
  assert.equal(v('h'), 7);
  assert.equal(v('i'), Infinity);
  assert.deepEqual(p.samples.get('k'), [{ labels: { x: '1' }, value: 3, timestamp: 1700000000000 }]);
  assert.deepEqual(p.samples.get('l'), [{ labels: {}, value: 4, timestamp: -5 }]);
  // a NaN never makes the sum NaN
  assert.equal(metricValue(p, 'a'), 0);
  assert.equal(metricValue(parsePrometheus('m{a="1"} NaN\nm{a="2"} 4'), 'm'), 4);
  assert.equal(metricValue(parsePrometheus('m{a="1"} +Inf\nm{a="2"} -Inf'), 'm'), 0);
});

test('empty label sets, trailing commas, blanks, CRLF', () => {
  const text = ['', '   ', 'e{} 7', 't{a="1",} 5', 's{ a = "1" , b="2" } 8', 'u  9  ', '\tv 10', 'w{a="1",b="2",}\t11', ''].join('\r\n');
  const p = parsePrometheus(text);
  assert.equal(p.errors, 0);
  assert.deepEqual(p.samples.get('e'), [{ labels: {}, value: 7 }]);
  assert.deepEqual(p.samples.get('t'), [{ labels: { a: '1' }, value: 5 }]);
  assert.deepEqual(p.samples.get('s'), [{ labels: { a: '1', b: '2' }, value: 8 }]);
  assert.deepEqual(p.samples.get('u'), [{ labels: {}, value: 9 }]);
  assert.deepEqual(p.samples.get('v'), [{ labels: {}, value: 10 }]);
  assert.deepEqual(p.samples.get('w'), [{ labels: { a: '1', b: '2' }, value: 11 }]);
  // the server's own output with CRLF line ends parses the same
  const crlf = parsePrometheus(FIXTURE.replace(/\n/g, '\r\n'));
  assert.equal(crlf.errors, 0);
  assert.deepEqual(crlf.samples, parsePrometheus(FIXTURE).samples);
  assert.deepEqual(crlf.help, parsePrometheus(FIXTURE).help);
});

test('malformed lines are skipped and counted; it never throws', () => {
  const bad = [
    'bad{a="b" 1',          // unclosed labels
    'bad{a=b} 1',           // an unquoted value
    'bad{a="b} 1',          // an unclosed string
    'bad{a="\\q"} 1',       // an unknown escape
    'bad{a="1",a="2"} 1',   // a label twice
    'bad{1a="x"} 1',        // a bad label name
    'bad{,} 1',
    'bad{a="1",,b="2"} 1',
    'bad 1 2 3',            // too many fields
    'bad abc',              // not a number
    'bad 0x10',
    'bad 1 1.5',            // a timestamp that is not an integer
    'bad',                  // no value
    'bad{} ',
    '9bad 1',               // a bad metric name
    '{a="b"} 1',
    '# TYPE bad nonsense',  // an unknown type
    '# TYPE 9bad gauge',
  ];
  const good = ['# a comment', '#another', '# HELP', 'ok 1', '# TYPE ok counter'];
  const p = parsePrometheus([...bad, ...good].join('\n'));
  assert.equal(p.errors, bad.length);
  assert.deepEqual([...p.samples.keys()], ['ok']);
  assert.equal(p.types.get('ok'), 'counter');
  assert.equal(p.types.has('bad'), false);
  for (const x of [undefined, null, '', 42, '{{{', '\u0000', 'a{'.repeat(10000), '"'.repeat(1000), `x{a="${'\\'.repeat(1001)}`]) {
    assert.doesNotThrow(() => parsePrometheus(x));
  }
  assert.equal(parsePrometheus('').errors, 0);
  assert.equal(parsePrometheus('').samples.size, 0);
});
