// Per reply: the seeds' diagnosis. Is it slow to start (queue or prefill: time to first token)
// or slow to stream (decode: inter-token latency)? Figures come from the server's `timings`
// extension when the reply finished, else from the arrival times the page measured itself.

export function formatMs(ms) {
  if (!Number.isFinite(ms)) return '–';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function formatCount(n) {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
}

export function formatRate(r) {
  if (!Number.isFinite(r) || r <= 0) return '–';
  return r >= 100 ? `${Math.round(r)}` : r.toFixed(1);
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

// What the page saw: arrivals[i] = ms from sending to the i-th streamed token.
export function clientTimings(arrivals) {
  const n = arrivals.length;
  const gaps = [];
  for (let i = 1; i < n; i++) gaps.push(arrivals[i] - arrivals[i - 1]);
  gaps.sort((a, b) => a - b);
  const decodeMs = n > 1 ? arrivals[n - 1] - arrivals[0] : 0;
  return {
    ttft_ms: n ? arrivals[0] : NaN,
    generated_tokens: n,
    decode_ms: decodeMs,
    decode_per_second: decodeMs > 0 ? (1000 * (n - 1)) / decodeMs : NaN,
    itl_ms_p50: percentile(gaps, 50),
    itl_ms_p99: percentile(gaps, 99),
  };
}

// A slow start: the first token took over a second and longer than the streaming after it.
const SLOW_START_MS = 1000;
// A stall: the slowest 1% of gaps is 5x the median and over a quarter second.
const STALL_RATIO = 5;
const STALL_MS = 250;

// One line saying where the time went.
export function verdict(t, { aborted = false } = {}) {
  const ttft = t.ttft_ms;
  const rate = t.decode_per_second;
  if (!Number.isFinite(ttft)) return { text: aborted ? 'stopped before the first token' : 'no tokens', slow: false };
  const decodeMs = Number.isFinite(t.decode_ms) ? t.decode_ms : 0;
  if (ttft >= SLOW_START_MS && ttft >= decodeMs) {
    const queue = t.queue_ms ?? 0;
    const prefill = t.prompt_ms ?? NaN;
    if (queue > 0 && !(prefill >= queue)) {
      return { text: `slow to start: waited ${formatMs(queue)} in the queue before its prompt was computed`, slow: true };
    }
    if (Number.isFinite(prefill) && t.prompt_tokens !== undefined) {
      const computed = t.prompt_tokens - (t.cached_prompt_tokens ?? 0);
      return { text: `slow to start: ${formatCount(computed)} prompt tokens took ${formatMs(prefill)} to prefill`, slow: true };
    }
    return { text: `slow to start: the first token took ${formatMs(ttft)}`, slow: true };
  }
  if (!Number.isFinite(rate)) return { text: `first token after ${formatMs(ttft)}`, slow: false };
  const p50 = t.itl_ms_p50, p99 = t.itl_ms_p99;
  if (Number.isFinite(p50) && Number.isFinite(p99) && p99 > STALL_MS && p99 > STALL_RATIO * p50) {
    return { text: `streaming at ${formatRate(rate)} tok/s, with stalls (ITL p99 ${formatMs(p99)}, p50 ${formatMs(p50)})`, slow: true };
  }
  return { text: `streaming at ${formatRate(rate)} tok/s`, slow: false };
}

// The figures a reply shows: the server's when it sent them, the page's own otherwise.
export function replyStats(serverTimings, arrivals, { aborted = false, usage = null } = {}) {
  const t = serverTimings ? { ...serverTimings } : clientTimings(arrivals);
  if (!serverTimings && usage) {
    t.prompt_tokens = usage.prompt_tokens;
    t.cached_prompt_tokens = usage.prompt_tokens_details?.cached_tokens ?? 0;
  }
  const v = verdict(t, { aborted });
  return {
    source: serverTimings ? 'server' : 'page',
    prompt_tokens: t.prompt_tokens,
    cached_prompt_tokens: t.cached_prompt_tokens,
    ttft_ms: t.ttft_ms,
    prompt_ms: t.prompt_ms,
    queue_ms: t.queue_ms,
    generated_tokens: t.generated_tokens ?? arrivals.length,
    decode_per_second: t.decode_per_second,
    itl_ms_p50: t.itl_ms_p50,
    itl_ms_p99: t.itl_ms_p99,
    aborted,
    verdict: v.text,
    slow: v.slow,
  };
}
