// The per-reply diagnosis: slow to start (queue, prefill) or slow to stream, from the server's
// timings or from the arrivals the page measured.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clientTimings, formatMs, replyStats, verdict } from '../src/verdict.js';

test('a long prefill is slow to start, naming the computed prompt tokens and the time', () => {
  const v = verdict({ ttft_ms: 4200, queue_ms: 50, prompt_ms: 4100, prompt_tokens: 2000, cached_prompt_tokens: 100, decode_ms: 900, decode_per_second: 31 });
  assert.deepEqual(v, { text: 'slow to start: 1,900 prompt tokens took 4.10 s to prefill', slow: true });
});

test('a long wait in the queue is named as such', () => {
  const v = verdict({ ttft_ms: 3000, queue_ms: 2900, prompt_ms: 100, prompt_tokens: 10, decode_ms: 500, decode_per_second: 40 });
  assert.equal(v.text, 'slow to start: waited 2.90 s in the queue before its prompt was computed');
});

test('a quick start streams at its decode rate; stalls are called out', () => {
  assert.deepEqual(verdict({ ttft_ms: 80, decode_ms: 3000, decode_per_second: 31.25, itl_ms_p50: 32, itl_ms_p99: 40 }), { text: 'streaming at 31.3 tok/s', slow: false });
  assert.deepEqual(verdict({ ttft_ms: 80, decode_ms: 3000, decode_per_second: 512.4 }), { text: 'streaming at 512 tok/s', slow: false });
  const s = verdict({ ttft_ms: 80, decode_ms: 3000, decode_per_second: 20, itl_ms_p50: 30, itl_ms_p99: 900 });
  assert.equal(s.slow, true);
  assert.match(s.text, /^streaming at 20.0 tok\/s, with stalls \(ITL p99 900 ms, p50 30 ms\)$/);
  // A slow first token that is still short beside the decode is not the story.
  assert.equal(verdict({ ttft_ms: 1500, decode_ms: 20000, decode_per_second: 10, prompt_ms: 1400, prompt_tokens: 500 }).slow, false);
});

test('no tokens, or stopped before the first', () => {
  assert.equal(verdict({ ttft_ms: NaN }).text, 'no tokens');
  assert.equal(verdict({ ttft_ms: NaN }, { aborted: true }).text, 'stopped before the first token');
});

test('the page measures its own figures when the server sent none (a stopped reply)', () => {
  const t = clientTimings([100, 110, 120, 130, 530]);
  assert.equal(t.ttft_ms, 100);
  assert.equal(t.generated_tokens, 5);
  assert.equal(t.decode_per_second, 1000 * 4 / 430);
  assert.equal(t.itl_ms_p50, 10);
  assert.equal(t.itl_ms_p99, 400);
  const s = replyStats(null, [100, 110, 120], { aborted: true, usage: { prompt_tokens: 7, prompt_tokens_details: { cached_tokens: 3 } } });
  assert.equal(s.source, 'page');
  assert.equal(s.prompt_tokens, 7);
  assert.equal(s.cached_prompt_tokens, 3);
  assert.equal(s.verdict, 'streaming at 100 tok/s');
  const server = replyStats({ ttft_ms: 5, decode_ms: 100, decode_per_second: 300, prompt_tokens: 4, cached_prompt_tokens: 0 }, [5, 6]);
  assert.equal(server.source, 'server');
  assert.equal(server.decode_per_second, 300);
});

test('durations read naturally', () => {
  assert.equal(formatMs(0.5), '0.50 ms');
  assert.equal(formatMs(12.4), '12 ms');
  assert.equal(formatMs(4100), '4.10 s');
  assert.equal(formatMs(12345), '12.3 s');
  assert.equal(formatMs(NaN), '–');
});
