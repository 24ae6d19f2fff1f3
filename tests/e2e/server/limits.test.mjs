// Server options that limit requests: the context (-c), --max-body, --api-key / LUMEN_API_KEY,
// --max-queue. Each error is followed by a request that must succeed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { assertApiError, assertStillServes, rawExchange, rawStream, startServer, waitForIdle } from './helpers.mjs';

describe('context -c 64 and --max-body 64KiB', () => {
  let server;
  before(async () => {
    server = await startServer(['-c', '64', '--max-body', '64KiB']);
  });
  after(async () => {
    await server?.stop();
  });

  test('/v1/models reports the context', async () => {
    const r = await server.request('/v1/models');
    assert.equal(r.json.data[0].max_model_len, 64);
  });

  test('a prompt longer than the context is 400, never truncated', async () => {
    const prompt = 'Once upon a time there was a little girl named Lily who liked to play. '.repeat(6);
    const tok = await server.post('/tokenize', { content: prompt });
    assert.ok(tok.json.tokens.length > 64, `prompt has ${tok.json.tokens.length} tokens`);
    for (const body of [
      { prompt, max_tokens: 4 },
      { prompt },
      { prompt: tok.json.tokens, max_tokens: 1 },
      { prompt: ['short', prompt], max_tokens: 1 },
    ]) {
      const r = await server.post('/v1/completions', body);
      const e = assertApiError(r, 400, { code: 'context_length_exceeded' });
      assert.match(e.message, /\d+/, 'the message names the numbers');
      await assertStillServes(server, 'a too long prompt');
    }
    // Exactly the context: no room for one generated token.
    const exact = Array(64).fill(tok.json.tokens[1]);
    exact[0] = 1;
    assertApiError(await server.post('/v1/completions', { prompt: exact, max_tokens: 1 }), 400, { code: 'context_length_exceeded' });
    // 63 prompt tokens and one generated: fits.
    const r = await server.post('/v1/completions', { prompt: exact.slice(0, 63), max_tokens: 1, temperature: 0 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.total_tokens, 64);
  });

  test('max_tokens that overflows the context is 400', async () => {
    const r = await server.post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 60 });
    const e = assertApiError(r, 400, { param: 'max_tokens', code: 'context_length_exceeded' });
    assert.match(e.message, /64/);
    const big = await server.post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 2147483647 });
    assertApiError(big, 400, { code: 'context_length_exceeded' });
    await assertStillServes(server, 'max_tokens overflow');
    // What fits runs to the end of the context, no further.
    const tok = await server.post('/tokenize', { content: 'Once upon a time' });
    const room = 64 - tok.json.tokens.length;
    const ok = await server.post('/v1/completions', { prompt: 'Once upon a time', max_tokens: room, temperature: 0, ignore_eos: true });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.usage.completion_tokens, room);
    assert.equal(ok.json.choices[0].finish_reason, 'length');
  });

  test('the default max_tokens (16) is clipped to the room left', async () => {
    const tok = await server.post('/tokenize', { content: 'Once upon a time' });
    const prompt = [...tok.json.tokens, ...Array(60 - tok.json.tokens.length).fill(tok.json.tokens[2])];
    assert.equal(prompt.length, 60);
    const r = await server.post('/v1/completions', { prompt, temperature: 0, ignore_eos: true });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.completion_tokens, 4);
    assert.equal(r.json.choices[0].finish_reason, 'length');
  });

  test('a body over --max-body is 413', async () => {
    const body = JSON.stringify({ prompt: 'hi', max_tokens: 1, user: 'x'.repeat(100 * 1000) });
    const r = await server.request('/v1/completions', { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
    assertApiError(r, 413);
    await assertStillServes(server, '413');
    // Declared too large, nothing sent: refused on the headers, before the body arrives.
    const r2 = await rawExchange(
      server.port,
      `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n{"content":`,
    );
    assert.equal(r2.status, 413, r2.data.slice(0, 300));
    assert.ok(r2.closed && r2.elapsedMs < 5000, 'the connection is closed at once');
    await assertStillServes(server, '413 on Content-Length');
    // Just under the limit is fine.
    const under = JSON.stringify({ prompt: 'hi', max_tokens: 1, user: 'x'.repeat(60 * 1000) });
    const r3 = await server.request('/v1/completions', { method: 'POST', body: under, headers: { 'Content-Type': 'application/json' } });
    assert.equal(r3.status, 200, r3.text);
  });
});

describe('--api-key', () => {
  let server;
  before(async () => {
    server = await startServer(['--api-key', 'sekret-key'], { apiKey: 'sekret-key' });
  });
  after(async () => {
    await server?.stop();
  });

  test('a missing or wrong key is 401; /health needs none', async () => {
    const body = { prompt: 'hi', max_tokens: 1 };
    for (const headers of [{}, { Authorization: 'Bearer wrong' }, { Authorization: 'sekret-key' }, { Authorization: 'Bearer sekret-key2' }, { Authorization: 'Bearer sekret-ke' }, { Authorization: 'Basic c2Vrcjp4' }]) {
      for (const [method, path] of [
        ['POST', '/v1/completions'],
        ['POST', '/v1/chat/completions'],
        ['GET', '/v1/models'],
        ['GET', '/metrics'],
        ['POST', '/tokenize'],
      ]) {
        const r = await server.request(path, { method, body: method === 'POST' ? body : undefined, headers, auth: false });
        assertApiError(r, 401, { type: 'authentication_error' });
        assert.match(r.headers['www-authenticate'] ?? '', /Bearer/);
      }
    }
    const h = await server.request('/health', { auth: false });
    assert.equal(h.status, 200);
    await assertStillServes(server, '401s');
  });

  test('the official client with the key works, with a wrong key gets AuthenticationError', async () => {
    const ok = await server.client().completions.create({ model: 'stories260K', prompt: 'Once', max_tokens: 2 });
    assert.equal(ok.choices.length, 1);
    await assert.rejects(
      server.client({ apiKey: 'nope' }).completions.create({ model: 'stories260K', prompt: 'Once', max_tokens: 2 }),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401,
    );
  });
});

describe('LUMEN_API_KEY and --model-alias', () => {
  let server;
  before(async () => {
    server = await startServer(['--model-alias', 'storyteller'], { env: { LUMEN_API_KEY: 'env-key' }, apiKey: 'env-key' });
  });

  test('the alias names the model; the file name still works; others are 404', async () => {
    const models = await server.request('/v1/models');
    assert.deepEqual(models.json.data.map((m) => m.id), ['storyteller']);
    for (const model of ['storyteller', 'stories260K']) {
      const r = await server.post('/v1/completions', { model, prompt: 'Once', max_tokens: 1 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.model, 'storyteller');
    }
    assertApiError(await server.post('/v1/completions', { model: 'gpt-4', prompt: 'Once', max_tokens: 1 }), 404, { param: 'model' });
    assert.match(await server.metrics(), /model_name="storyteller"/);
  });

  after(async () => {
    await server?.stop();
  });

  test('the environment key is required', async () => {
    assertApiError(await server.post('/v1/completions', { prompt: 'hi', max_tokens: 1 }, { auth: false }), 401);
    assertApiError(
      await server.post('/v1/completions', { prompt: 'hi', max_tokens: 1 }, { headers: { Authorization: 'Bearer other' } }),
      401,
    );
    assert.equal((await server.request('/health', { auth: false })).status, 200);
    await assertStillServes(server, '401 by LUMEN_API_KEY');
  });
});

describe('--max-queue 1 --parallel 1', () => {
  let server;
  before(async () => {
    server = await startServer(['--max-queue', '1', '--parallel', '1']);
  });
  after(async () => {
    await server?.stop();
  });

  test('a full waiting queue is 429 with Retry-After', async () => {
    const long = { prompt: 'Once upon a time', max_tokens: 2000, temperature: 0, ignore_eos: true, stream: true };
    // The first runs (we wait for its first token); the second waits (its streamed response head
    // is sent once it is queued); any more are refused.
    const sockets = [];
    let firstToken;
    const gotFirst = new Promise((r) => (firstToken = r));
    const running = rawStream(server.port, long, {
      onHead: (sock) => sockets.push(sock),
      onEvent: () => firstToken(),
    });
    await gotFirst;
    let queued;
    const gotQueued = new Promise((r) => (queued = r));
    const waiting = rawStream(server.port, long, {
      onHead: (sock, status) => {
        sockets.push(sock);
        queued(status);
      },
    });
    assert.equal(await gotQueued, 200);
    const refused = await Promise.all(
      [1, 2, 3].map(() => server.post('/v1/completions', { ...long, stream: false, max_tokens: 8 })),
    );
    for (const r of refused) {
      assertApiError(r, 429, { type: 'rate_limit_error', code: 'queue_full' });
      assert.ok(r.headers['retry-after'], 'no Retry-After header');
    }
    // Through the client: RateLimitError (no retries).
    await assert.rejects(
      server.client().completions.create({ model: 'stories260K', prompt: 'Once', max_tokens: 2 }),
      (e) => e instanceof OpenAI.RateLimitError && e.status === 429,
    );
    const m = await server.metrics();
    assert.match(m, /lumen_http_requests_total\{status="429"\} 4\b/);
    // Hang up on both long requests: everything is freed and the server serves again.
    for (const s of sockets) s.destroy();
    await Promise.all([running, waiting]);
    await waitForIdle(server);
    await assertStillServes(server, '429');
  });
});

describe('--max-connections 4', () => {
  let server;
  before(async () => {
    server = await startServer(['--max-connections', '4']);
  });
  after(async () => {
    await server?.stop();
  });

  test('connections beyond the limit get 503 and are closed; freed ones are reused', async () => {
    const idle = [];
    for (let i = 0; i < 4; i++) {
      const s = net.connect(server.port, '127.0.0.1');
      await new Promise((r) => s.on('connect', r));
      s.on('error', () => {});
      idle.push(s);
    }
    await new Promise((r) => setTimeout(r, 50));
    const r = await rawExchange(server.port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.equal(r.status, 503, r.data.slice(0, 200));
    assert.ok(r.closed);
    for (const s of idle) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    await assertStillServes(server, '503 for too many connections');
  });
});
