// Shared helpers of the `lumen serve` end-to-end tests: start a server on a free loopback port,
// talk to it with the official openai client or with raw HTTP / raw TCP, read /metrics, stop it.
//
// Environment: LUMEN_CLI (the lumen binary; default ../../../build/lumen from this folder),
// LUMEN_SHARED (the shared test data; default ../shared next to the repository), LUMEN_SANITIZED
// (set by scripts/test_sanitized.sh: timing bounds are relaxed, heavy loops shortened).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(here, '../../..');
export const LUMEN_CLI = path.resolve(process.env.LUMEN_CLI || path.join(here, '../../../build/lumen'));
export const LUMEN_SHARED = path.resolve(process.env.LUMEN_SHARED || path.join(REPO_ROOT, '../shared'));
export const MODEL = path.join(LUMEN_SHARED, 'models/stories260K.gguf');
export const SANITIZED = !!process.env.LUMEN_SANITIZED;
// Slower builds (sanitizers) get proportionally longer deadlines.
export const SLOW = SANITIZED ? 10 : 1;

if (!existsSync(LUMEN_CLI)) throw new Error(`lumen binary not found at ${LUMEN_CLI} (build it, or set LUMEN_CLI)`);
if (!existsSync(MODEL)) throw new Error(`model not found at ${MODEL} (set LUMEN_SHARED to the shared test data)`);

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Servers still running when this process ends (a failed test, a runner's timeout) are killed.
const live = new Set();
function killAll() {
  for (const p of live) {
    try {
      p.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll();
    process.exit(1);
  });
}

// Starts `lumen serve -m MODEL --port 0 -t 1 ...args` and resolves when /health answers 200 and
// the "ready" line is on stderr.
// opts.env: extra environment; opts.apiKey: the key clients send (for client()/request());
// opts.threads: engine threads (default 1; null: the server's default, all cores). One thread
// by default because the client runs on the same (often 2-core, often busy) machine: with every
// core in the engine's pool, a step waits whenever the OS runs the client or a neighbour on a
// pool thread's core, and decode gets 3-30x slower.
export async function startServer(args = [], opts = {}) {
  const env = { ...process.env, ...(opts.env || {}) };
  if (!(opts.env && 'LUMEN_API_KEY' in opts.env)) delete env.LUMEN_API_KEY;
  const threads = opts.threads === undefined ? 1 : opts.threads;
  const threadArgs = threads === null || args.includes('-t') || args.includes('--threads') ? [] : ['-t', String(threads)];
  const proc = spawn(LUMEN_CLI, ['serve', '-m', MODEL, '--port', '0', ...threadArgs, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(proc);
  let stderr = '';
  let stdout = '';
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      live.delete(proc);
      exited = { code, signal };
      resolve(exited);
    });
  });
  proc.stdout.on('data', (d) => (stdout += d));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`lumen serve printed no port within 30 s; stderr:\n${stderr}`)), 30000 * SLOW);
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`lumen serve exited (code ${code}, signal ${signal}) before listening; stderr:\n${stderr}`));
    });
  });
  const server = {
    proc,
    port,
    host: '127.0.0.1',
    base: `http://127.0.0.1:${port}`,
    apiKey: opts.apiKey,
    stderr: () => stderr,
    stdout: () => stdout,
    exited: () => exited,
    exitPromise,
    // The official client, pointed at this server; no retries (a retry would hide a failure).
    client(extra = {}) {
      return new OpenAI({
        baseURL: `${server.base}/v1`,
        apiKey: server.apiKey ?? 'no-key',
        maxRetries: 0,
        timeout: 120000 * SLOW,
        ...extra,
      });
    },
    request(p, o = {}) {
      const headers = { ...(o.headers || {}) };
      if (server.apiKey && !('authorization' in lowerKeys(headers)) && o.auth !== false)
        headers.Authorization = `Bearer ${server.apiKey}`;
      return request(port, p, { ...o, headers });
    },
    post(p, body, o = {}) {
      return server.request(p, { method: 'POST', body, ...o });
    },
    metrics() {
      return server.request('/metrics').then((r) => {
        assert.equal(r.status, 200, `/metrics: ${r.text}`);
        return r.text;
      });
    },
    // Stops with SIGTERM and checks the exit: status 0, no leaked KV blocks reported.
    async stop({ timeoutMs = 30000 * SLOW } = {}) {
      if (!exited) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
        await exitPromise;
        clearTimeout(t);
      }
      checkExit(server);
      return exited;
    },
  };
  const deadline = Date.now() + 60000 * SLOW;
  while (true) {
    if (exited) throw new Error(`lumen serve exited (code ${exited.code}) while loading; stderr:\n${stderr}`);
    try {
      const r = await request(port, '/health');
      if (r.status === 200) {
        assert.deepEqual(r.json, { status: 'ok' });
        break;
      }
      assert.equal(r.status, 503, `/health while loading: ${r.status} ${r.text}`);
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
    }
    if (Date.now() > deadline) throw new Error(`/health never answered 200; stderr:\n${stderr}`);
    await sleep(20);
  }
  // The server writes its "ready" line before /health turns 200, but that line comes through the
  // stderr pipe, whose events Node may deliver after the /health response: wait for it too, so
  // tests that read the line do not race it.
  while (!/lumen: ready/.test(stderr)) {
    if (Date.now() > deadline) throw new Error(`no "ready" line on stderr; stderr:\n${stderr}`);
    await sleep(5);
  }
  return server;
}

export function checkExit(server) {
  const { code, signal } = server.exited();
  const err = server.stderr();
  assert.equal(signal, null, `lumen serve was killed by ${signal}; stderr:\n${err}`);
  assert.equal(code, 0, `lumen serve exited with ${code}; stderr:\n${err}`);
  assert.doesNotMatch(err, /leak/i, `lumen serve reported leaked KV blocks; stderr:\n${err}`);
  assert.doesNotMatch(err, /AddressSanitizer|runtime error:/, `sanitizer report; stderr:\n${err}`);
}

function lowerKeys(h) {
  const o = {};
  for (const k of Object.keys(h)) o[k.toLowerCase()] = h[k];
  return o;
}

// One HTTP request on its own connection. body: an object (sent as JSON), a string or a Buffer.
// Resolves { status, headers, text, json, raw } (json: undefined when the body is not JSON; raw:
// the body's bytes).
export function request(port, p, { method = 'GET', headers = {}, body, timeoutMs = 60000 * SLOW } = {}) {
  return new Promise((resolve, reject) => {
    let data = body;
    const h = { ...headers };
    if (data !== undefined && !(typeof data === 'string') && !Buffer.isBuffer(data)) {
      data = JSON.stringify(data);
      if (!('content-type' in lowerKeys(h))) h['Content-Type'] = 'application/json';
    }
    if (data !== undefined) h['Content-Length'] = Buffer.byteLength(data);
    const req = http.request({ host: '127.0.0.1', port, path: p, method, headers: h, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const text = raw.toString('utf8');
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, text, json, raw });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${p}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    if (data !== undefined) req.write(data);
    req.end();
  });
}

// Writes raw bytes on a fresh TCP connection and collects what comes back until the server
// closes (or timeoutMs passes). Resolves { data (string), closed, elapsedMs, status }.
export function rawExchange(port, bytes, { timeoutMs = 10000 * SLOW, endAfterWrite = false } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const chunks = [];
    const sock = net.connect(port, '127.0.0.1');
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      const data = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data);
      resolve({ data, closed, elapsedMs: Date.now() - t0, status: m ? Number(m[1]) : null });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.on('connect', () => {
      sock.write(bytes);
      if (endAfterWrite) sock.end();
    });
    sock.on('data', (c) => chunks.push(c));
    sock.on('end', () => finish(true));
    sock.on('close', () => finish(true));
    sock.on('error', (e) => {
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE') finish(true);
      else if (!done) {
        done = true;
        clearTimeout(timer);
        reject(e);
      }
    });
  });
}

// The body of an HTTP/1.1 response read from a raw socket ("chunked" bodies de-chunked).
export function parseRawResponse(data) {
  const i = data.indexOf('\r\n\r\n');
  if (i < 0) return null;
  const head = data.slice(0, i);
  let body = data.slice(i + 4);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  if (/transfer-encoding:\s*chunked/i.test(head)) {
    let out = '';
    let rest = body;
    while (rest.length) {
      const j = rest.indexOf('\r\n');
      if (j < 0) break;
      const n = parseInt(rest.slice(0, j), 16);
      if (!n) break;
      out += rest.slice(j + 2, j + 2 + n);
      rest = rest.slice(j + 2 + n + 2);
    }
    body = out;
  }
  return { status, head, body: Buffer.from(body, 'latin1').toString('utf8') };
}

// Asserts an OpenAI-style error response: {"error": {"message", "type", "param", "code"}}.
export function assertApiError(res, status, { param, code, type } = {}) {
  assert.equal(res.status, status, `expected HTTP ${status}, got ${res.status}: ${res.text}`);
  assert.ok(res.json && typeof res.json === 'object', `error body is not JSON: ${res.text}`);
  const e = res.json.error;
  assert.ok(e && typeof e === 'object', `no "error" object: ${res.text}`);
  for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in e, `error.${k} missing: ${res.text}`);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0, 'error.message is empty');
  assert.equal(typeof e.type, 'string');
  if (param !== undefined) assert.equal(e.param, param, `error.param: ${res.text}`);
  if (code !== undefined) assert.equal(e.code, code, `error.code: ${res.text}`);
  if (type !== undefined) assert.equal(e.type, type, `error.type: ${res.text}`);
  else if (status >= 400 && status < 500 && ![401, 403, 404, 429].includes(status)) assert.equal(e.type, 'invalid_request_error');
  return e;
}

// A short greedy completion that must succeed: run after every error and abuse case.
export async function assertStillServes(server, msg = '') {
  const r = await server.post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
  assert.equal(r.status, 200, `the server no longer serves${msg ? ` (after ${msg})` : ''}: ${r.status} ${r.text}`);
  assert.equal(r.json.choices.length, 1);
  assert.equal(r.json.usage.completion_tokens, 4);
  return r.json;
}

// Prometheus text format: the value of one sample, matching the metric name and the labels
// given (others ignored). undefined when absent.
export function metricValue(text, name, labels = {}) {
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = {};
    for (const kv of (m[3] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have[kv[1]] = kv[2];
    if (Object.entries(labels).every(([k, v]) => have[k] === String(v))) return Number(m[4]);
  }
  return undefined;
}

// Polls /metrics until every metric in `want` ({name: value}) has that value.
export async function waitForMetrics(server, want, timeoutMs = 10000 * SLOW) {
  const deadline = Date.now() + timeoutMs;
  let text = '';
  while (true) {
    text = await server.metrics();
    const ok = Object.entries(want).every(([k, v]) => metricValue(text, k) === v);
    if (ok) return text;
    if (Date.now() > deadline) {
      const got = Object.fromEntries(Object.keys(want).map((k) => [k, metricValue(text, k)]));
      assert.fail(`metrics never reached ${JSON.stringify(want)}; last: ${JSON.stringify(got)}`);
    }
    await sleep(25);
  }
}

// Waits until the engine holds nothing: 0 KV blocks in use, nothing running or waiting.
export function waitForIdle(server, timeoutMs) {
  return waitForMetrics(
    server,
    { lumen_kv_cache_blocks_used: 0, lumen_num_requests_running: 0, lumen_num_requests_waiting: 0 },
    timeoutMs,
  );
}

// Opens a raw SSE request and calls onEvent(json|'[DONE]', socket) for each `data:` line.
// Resolves { status, events, head, closedByServer } when the response ends or the socket closes.
// onHead(socket, status) is called when the response head has arrived.
export function rawStream(port, body, { onEvent = () => {}, onHead = () => {}, headers = {}, path: p = '/v1/completions' } = {}) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    let head = null;
    let status = null;
    const events = [];
    let sse = '';
    let finished = false;
    const hdrs = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    sock.on('connect', () => {
      sock.write(
        `POST ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${hdrs}` +
          `Content-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      );
    });
    const end = (closedByServer) => {
      if (finished) return;
      finished = true;
      sock.destroy();
      resolve({ status, head, events, closedByServer });
    };
    // Chunked decoding, incrementally.
    let chunkBuf = '';
    sock.on('data', (d) => {
      if (finished) return;
      buf += d.toString('latin1');
      if (head === null) {
        const i = buf.indexOf('\r\n\r\n');
        if (i < 0) return;
        head = buf.slice(0, i);
        status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
        buf = buf.slice(i + 4);
        onHead(sock, status);
        if (finished) return;
      }
      chunkBuf += buf;
      buf = '';
      while (true) {
        const j = chunkBuf.indexOf('\r\n');
        if (j < 0) break;
        const n = parseInt(chunkBuf.slice(0, j), 16);
        if (Number.isNaN(n)) return end(false);
        if (n === 0) {
          flushSse();
          return end(false);
        }
        if (chunkBuf.length < j + 2 + n + 2) break;
        sse += Buffer.from(chunkBuf.slice(j + 2, j + 2 + n), 'latin1').toString('utf8');
        chunkBuf = chunkBuf.slice(j + 2 + n + 2);
        flushSse();
        if (finished) return;
      }
    });
    function flushSse() {
      let k;
      while ((k = sse.indexOf('\n\n')) >= 0) {
        const ev = sse.slice(0, k);
        sse = sse.slice(k + 2);
        for (const line of ev.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const payloadText = line.slice(6);
          const e = payloadText === '[DONE]' ? '[DONE]' : JSON.parse(payloadText);
          events.push(e);
          onEvent(e, sock, () => end(false));
          if (finished) return;
        }
      }
    }
    sock.on('end', () => end(true));
    sock.on('close', () => end(true));
    sock.on('error', (e) => (finished ? undefined : reject(e)));
  });
}

// The token id of the lead byte (0xE6) of "日", which stories260K's vocabulary lacks, so the
// tokenizer falls back to its three byte tokens: generating that token again and again makes
// text that is not valid UTF-8.
export async function leadByteToken(server) {
  const r = await server.post('/tokenize', { content: '日', add_special: false });
  assert.equal(r.status, 200, r.text);
  const ids = r.json.tokens;
  assert.ok(ids.length >= 3, `expected byte-fallback tokens for 日: ${r.text}`);
  const [a, b, c] = ids.slice(-3);
  const d = await server.post('/detokenize', { tokens: [a, b, c] });
  assert.equal(d.json.content.endsWith('日'), true, `the last three tokens of 日 are not its bytes: ${d.text}`);
  return a;
}
