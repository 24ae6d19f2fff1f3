// Soak client for scripts/soak.sh: 64 streaming clients (by default) against a running
// `lumen serve` for a given time, a quarter of the streams cancelled at a random point by
// closing the connection. Afterwards it waits until the server is idle and checks: no request
// failed, every KV block is back in the pool, and the server's resident memory stayed flat
// (the highest RSS in the last quarter of the run within 10% + 16 MiB of the highest in the
// second quarter, after the warm-up). Prints one JSON summary; exit status 1 if a check fails.
// Usage: node soak_client.mjs URL SERVER_PID SECONDS [CLIENTS]
import http from 'node:http';
import fs from 'node:fs';

const [url, pidArg, secsArg, clientsArg] = process.argv.slice(2);
const base = new URL(url);
const pid = Number(pidArg);
const seconds = Number(secsArg);
const clients = Number(clientsArg ?? 64);
const deadline = Date.now() + seconds * 1000;

function rssKiB() {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return m ? Number(m[1]) : 0;
}

function get(path) {
  return new Promise((resolve, reject) => {
    http.get({ host: base.hostname, port: base.port, path, agent: false }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
}

function metric(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(name + '{') || l.startsWith(name + ' '));
  return line ? Number(line.split(' ').pop()) : NaN;
}

const words = ['Once', 'upon', 'a', 'time', 'there', 'was', 'a', 'little', 'dog', 'who', 'liked', 'to', 'run', 'in', 'the', 'park', 'with', 'Lily'];
let rng = 12345;  // xorshift32: reproducible, in 32-bit integer arithmetic
const rand = (n) => { rng ^= rng << 13; rng ^= rng >>> 17; rng ^= rng << 5; return (rng >>> 0) % n; };
const stats = { requests: 0, completed: 0, cancelled: 0, errors: 0, first_error: null, tokens: 0 };

function fail(why) {
  stats.errors++;
  if (!stats.first_error) stats.first_error = why;
}

// One request; resolves when it ended (completed, cancelled or failed).
function one() {
  return new Promise((resolve) => {
    const stream = rand(10) < 8;
    const cancelAfter = stream && rand(4) === 0 ? 1 + rand(8) : -1;
    const prompt = Array.from({ length: 1 + rand(40) }, () => words[rand(words.length)]).join(' ');
    const body = JSON.stringify({
      prompt, max_tokens: 1 + rand(64), temperature: rand(2) ? 0 : 0.8, seed: rand(1000),
      n: rand(20) === 0 ? 2 : 1, stream, logprobs: rand(10) === 0 ? 2 : undefined,
      stop: rand(5) === 0 ? ['.'] : undefined,
    });
    stats.requests++;
    let cancelled = false;
    const req = http.request({ host: base.hostname, port: base.port, path: '/v1/completions', method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let buf = '';
      let chunks = 0;
      let done = false;
      res.setEncoding('utf8');
      res.on('data', (c) => {
        if (cancelled) return;
        buf += c;
        if (!stream) return;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (!ev.startsWith('data: ')) { fail(`not an SSE event: ${ev.slice(0, 80)}`); continue; }
          const data = ev.slice(6);
          if (data === '[DONE]') { done = true; continue; }
          try {
            const j = JSON.parse(data);
            if (j.error) fail(`error event: ${j.error.message}`);
            else chunks++;
          } catch { fail(`invalid JSON in an event: ${data.slice(0, 80)}`); }
          if (chunks === cancelAfter && !done) { cancelled = true; stats.cancelled++; req.destroy(); resolve(); return; }
        }
      });
      res.on('end', () => {
        if (cancelled) return;
        if (res.statusCode !== 200) fail(`HTTP ${res.statusCode}: ${buf.slice(0, 200)}`);
        else if (stream && !done) fail('stream ended without [DONE]');
        else if (!stream) {
          try { stats.tokens += JSON.parse(buf).usage.completion_tokens; } catch { fail('invalid JSON body'); }
        }
        if (stream) stats.tokens += chunks;
        stats.completed++;
        resolve();
      });
      res.on('error', (e) => { if (!cancelled) fail(`response error: ${e.message}`); resolve(); });
    });
    req.on('error', (e) => { if (!cancelled) fail(`request error: ${e.message}`); resolve(); });
    req.end(body);
  });
}

const samples = [];
const t0 = Date.now();
const sampler = setInterval(() => samples.push({ t: (Date.now() - t0) / 1000, rss: rssKiB() }), 500);
await Promise.all(Array.from({ length: clients }, async () => { while (Date.now() < deadline) await one(); }));
clearInterval(sampler);

// Idle: every cancelled request's blocks must come back.
let m = '';
let used = NaN, running = NaN;
for (let i = 0; i < 300; i++) {
  m = (await get('/metrics')).body;
  used = metric(m, 'lumen_kv_cache_blocks_used');
  running = metric(m, 'lumen_num_requests_running');
  if (used === 0 && running === 0) break;
  await new Promise((r) => setTimeout(r, 100));
}
const q = (a, b) => samples.filter((s) => s.t >= a * seconds && s.t < b * seconds).reduce((x, s) => Math.max(x, s.rss), 0);
const rssQ2 = q(0.25, 0.5), rssQ4 = q(0.75, 1.01);
const flat = rssQ4 <= rssQ2 * 1.10 + 16 * 1024;
const summary = {
  ...stats, seconds, clients,
  kv_blocks_used_after: used, running_after: running,
  rss_kib_start: samples.length ? samples[0].rss : 0, rss_kib_second_quarter_max: rssQ2, rss_kib_last_quarter_max: rssQ4,
  rss_flat: flat,
  aborted_counted: metric(m.split('\n').filter((l) => l.includes('finished_reason="abort"')).join('\n'), 'lumen_request_success_total'),
};
console.log(JSON.stringify(summary));
process.exit(stats.errors === 0 && used === 0 && running === 0 && flat ? 0 : 1);
