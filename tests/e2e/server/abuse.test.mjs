// Clients that misbehave, over raw TCP: hang-ups mid-stream and mid-request, half-sent bodies,
// slow loris connections. A server started with --timeout 2 closes what does not arrive in time
// and keeps answering everyone else promptly.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import {
  SLOW,
  assertStillServes,
  metricValue,
  rawExchange,
  rawStream,
  sleep,
  startServer,
  waitForIdle,
} from './helpers.mjs';

const TIMEOUT_S = 2;
let server;
before(async () => {
  server = await startServer(['--timeout', String(TIMEOUT_S)]);
});
after(async () => {
  await server?.stop();
});

const LONG = { prompt: 'Once upon a time', max_tokens: 2000, temperature: 0, ignore_eos: true };
const aborts = async () =>
  metricValue(await server.metrics(), 'lumen_request_success_total', { finished_reason: 'abort' });

// Opens a connection that sends `first`, then one byte of `rest` every intervalMs. Resolves
// { closedAfterMs, data } when the server closes it (or after maxMs: closedAfterMs null).
function slowClient(first, rest, intervalMs, maxMs) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const sock = net.connect(server.port, '127.0.0.1');
    let data = '';
    let i = 0;
    let timer;
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearInterval(timer);
      clearTimeout(limit);
      sock.destroy();
      resolve({ closedAfterMs: closed ? Date.now() - t0 : null, data });
    };
    const limit = setTimeout(() => finish(false), maxMs);
    sock.on('connect', () => {
      sock.write(first);
      timer = setInterval(() => {
        if (i < rest.length && !sock.destroyed) sock.write(rest[i++]);
      }, intervalMs);
    });
    sock.on('data', (d) => (data += d.toString('latin1')));
    sock.on('close', () => finish(true));
    sock.on('error', () => finish(true));
  });
}

describe('hang-ups', () => {
  test('a client that disconnects mid-stream cancels its request', async () => {
    const before = await aborts();
    let events = 0;
    const r = await rawStream(server.port, { ...LONG, stream: true }, {
      onEvent: (e, sock, end) => {
        events++;
        end(); // destroys the socket after the first SSE chunk
      },
    });
    assert.equal(r.status, 200);
    assert.equal(events, 1);
    await waitForIdle(server);
    assert.equal(await aborts(), before + 1, 'the aborted request is counted as finished_reason="abort"');
    await assertStillServes(server, 'a disconnect mid-stream');
  });

  test('n = 3 streamed, disconnect: all three completions are cancelled', async () => {
    const before = await aborts();
    await rawStream(server.port, { ...LONG, n: 3, stream: true }, { onEvent: (e, sock, end) => end() });
    await waitForIdle(server);
    assert.equal(await aborts(), before + 3);
    await assertStillServes(server, 'an n = 3 disconnect');
  });

  test('a client that disconnects while waiting for a whole (non-streamed) response cancels it', async () => {
    const before = await aborts();
    const body = JSON.stringify({ ...LONG, n: 4 });
    const sock = net.connect(server.port, '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    // Wait until the engine has the request, then hang up.
    const deadline = Date.now() + 5000 * SLOW;
    while (metricValue(await server.metrics(), 'lumen_num_requests_running') === 0 && Date.now() < deadline) await sleep(2);
    sock.destroy();
    await waitForIdle(server);
    const after = await aborts();
    // The hang-up may race the end of generation; at least some completions must have been cut.
    assert.ok(after > before, 'the hang-up did not cancel the request');
    await assertStillServes(server, 'a disconnect before a whole response');
  });

  test('a client that hangs up half-way through its body', async () => {
    const r = await rawExchange(
      server.port,
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prompt": "Once',
      { endAfterWrite: true },
    );
    assert.ok(r.closed);
    await assertStillServes(server, 'a hang-up half-way through a body');
  });

  test('many hang-ups at once leave nothing behind', async () => {
    const before = await aborts();
    await Promise.all(
      Array.from({ length: 16 }, () => rawStream(server.port, { ...LONG, stream: true }, { onEvent: (e, sock, end) => end() })),
    );
    await waitForIdle(server);
    assert.equal(await aborts(), before + 16);
    await assertStillServes(server, '16 hang-ups');
  });
});

describe('timeouts (--timeout 2)', () => {
  test('a half-sent body (Content-Length 100, 10 bytes sent) is closed after the timeout', async () => {
    const t0 = Date.now();
    const probe = (async () => {
      // Meanwhile a normal request is answered at once.
      await sleep(200);
      const t = Date.now();
      await assertStillServes(server, 'a half-sent body (while it is pending)');
      return Date.now() - t;
    })();
    const r = await rawExchange(
      server.port,
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prompt":',
      { timeoutMs: (TIMEOUT_S + 8) * 1000 * SLOW },
    );
    const elapsed = Date.now() - t0;
    assert.ok(r.closed, 'the connection was never closed');
    assert.ok(r.status === null || r.status === 408, `expected 408 or a close, got: ${r.data.slice(0, 200)}`);
    assert.ok(elapsed >= TIMEOUT_S * 1000 - 300, `closed after ${elapsed} ms, before the timeout`);
    assert.ok(elapsed <= (TIMEOUT_S + 3) * 1000 * SLOW, `closed only after ${elapsed} ms`);
    assert.ok((await probe) < 1500 * SLOW, 'a normal request was slow while a body was pending');
    await assertStillServes(server, 'a half-sent body');
  });

  test('an idle connection is closed after the timeout', async () => {
    const r = await rawExchange(server.port, '', { timeoutMs: (TIMEOUT_S + 8) * 1000 * SLOW });
    assert.ok(r.closed);
    assert.ok(r.elapsedMs >= TIMEOUT_S * 1000 - 300 && r.elapsedMs <= (TIMEOUT_S + 3) * 1000 * SLOW, `closed after ${r.elapsedMs} ms`);
    await assertStillServes(server, 'an idle connection');
  });

  test('64 slow loris connections do not stop a normal request; all are closed by the timeout', async () => {
    const line = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' + 'a'.repeat(200) + '\r\n\r\n';
    const post = 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: ' + 'b'.repeat(200);
    const clients = [];
    for (let i = 0; i < 64; i++) {
      // Half trickle the request line and headers of a GET, half a POST's headers.
      const text = i % 2 ? line : post;
      const cut = i % 2 ? 5 + (i % 10) : 60 + (i % 10);
      clients.push(slowClient(text.slice(0, cut), text.slice(cut), 250, (TIMEOUT_S + 8) * 1000 * SLOW));
    }
    await sleep(300);
    // Normal requests are answered promptly while the 64 trickle.
    for (let k = 0; k < 3; k++) {
      const t = Date.now();
      await assertStillServes(server, 'slow loris (while they trickle)');
      const h = await server.request('/health');
      assert.equal(h.status, 200);
      assert.ok(Date.now() - t < 1500 * SLOW, `a normal request took ${Date.now() - t} ms beside 64 slow connections`);
      await sleep(200);
    }
    const streamed = await server.client().completions.create({ prompt: 'Once upon a time', max_tokens: 8, stream: true, model: 'stories260K' });
    let n = 0;
    for await (const c of streamed) n += c.choices.length;
    assert.ok(n >= 1);
    const results = await Promise.all(clients);
    for (const [i, r] of results.entries()) {
      assert.notEqual(r.closedAfterMs, null, `slow connection ${i} was never closed`);
      assert.ok(r.closedAfterMs >= TIMEOUT_S * 1000 - 300, `slow connection ${i} closed after only ${r.closedAfterMs} ms`);
      assert.ok(r.closedAfterMs <= (TIMEOUT_S + 3) * 1000 * SLOW, `slow connection ${i} closed after ${r.closedAfterMs} ms`);
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(r.data)?.[1];
      assert.ok(status === undefined || status === '408', `slow connection ${i} got: ${r.data.slice(0, 120)}`);
    }
    await assertStillServes(server, '64 slow loris connections');
    const m = await server.metrics();
    assert.ok((metricValue(m, 'lumen_http_requests_total', { status: 408 }) ?? 0) >= 1, 'no 408 counted');
  });
});
