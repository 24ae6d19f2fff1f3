// Error responses over raw HTTP: every case gets its status and an OpenAI-style error body,
// and the server answers a normal request right after.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertApiError, assertStillServes, parseRawResponse, rawExchange, startServer } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const COMPLETION = { prompt: 'Once upon a time', max_tokens: 4, temperature: 0 };
const CHAT = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 };

async function expectError(path, body, status, expect = {}, opts = {}) {
  const r = await server.request(path, { method: 'POST', body, ...opts });
  const e = assertApiError(r, status, expect);
  await assertStillServes(server, `${path} ${typeof body === 'string' ? body.slice(0, 60) : JSON.stringify(body).slice(0, 60)}`);
  return e;
}

describe('400: bodies that are not JSON objects', () => {
  const cases = [
    ['malformed JSON', '{"prompt": "hi", '],
    ['trailing garbage', '{"prompt": "hi"} x'],
    ['empty body', ''],
    ['a JSON array', '[1, 2]'],
    ['a JSON string', '"prompt"'],
    ['null', 'null'],
    ['NaN literal', '{"prompt": "hi", "temperature": NaN}'],
  ];
  for (const [name, body] of cases) {
    test(name, async () => {
      for (const path of ['/v1/completions', '/v1/chat/completions', '/tokenize', '/detokenize'])
        await expectError(path, body, 400, {}, { headers: { 'Content-Type': 'application/json' } });
    });
  }

  test('invalid UTF-8 in the body', async () => {
    const bad = Buffer.concat([Buffer.from('{"prompt": "Once '), Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from(' upon", "max_tokens": 2}')]);
    await expectError('/v1/completions', bad, 400, {}, { headers: { 'Content-Type': 'application/json' } });
    const badChat = Buffer.concat([
      Buffer.from('{"messages": [{"role": "user", "content": "'),
      Buffer.from([0xe2, 0x82]), // a truncated 3-byte sequence
      Buffer.from('"}]}'),
    ]);
    await expectError('/v1/chat/completions', badChat, 400, {}, { headers: { 'Content-Type': 'application/json' } });
    // An overlong encoding and a lone surrogate (CESU) are not UTF-8 either.
    for (const bytes of [[0xc0, 0xaf], [0xed, 0xa0, 0x80]]) {
      const b = Buffer.concat([Buffer.from('{"content": "'), Buffer.from(bytes), Buffer.from('"}')]);
      await expectError('/tokenize', b, 400, {}, { headers: { 'Content-Type': 'application/json' } });
    }
  });

  test('JSON nested 10000 deep', async () => {
    const deep = '{"prompt": "hi", "x": ' + '['.repeat(10000) + ']'.repeat(10000) + '}';
    await expectError('/v1/completions', deep, 400);
    const deepObj = '{"prompt": "hi", "x": ' + '{"a":'.repeat(10000) + '1' + '}'.repeat(10000) + '}';
    await expectError('/v1/completions', deepObj, 400);
    // Unbalanced: opening brackets only.
    await expectError('/v1/chat/completions', '['.repeat(100000), 400);
  });
});

describe('400: wrong field types and out-of-range values', () => {
  const completionCases = [
    [{ prompt: 42 }, 'prompt'],
    [{ prompt: [] }, 'prompt'],
    [{ prompt: [1, 'a'] }, 'prompt'],
    [{ prompt: [1, 2.5] }, 'prompt'],
    [{ prompt: [1, 100000] }, 'prompt'],
    [{ prompt: [1, -1] }, 'prompt'],
    [{}, 'prompt'],
    [{ temperature: 3 }, 'temperature'],
    [{ temperature: -0.5 }, 'temperature'],
    [{ temperature: 'hot' }, 'temperature'],
    [{ top_p: 0 }, 'top_p'],
    [{ top_p: 1.5 }, 'top_p'],
    [{ top_k: -2 }, 'top_k'],
    [{ min_p: 2 }, 'min_p'],
    [{ presence_penalty: 3 }, 'presence_penalty'],
    [{ frequency_penalty: -3 }, 'frequency_penalty'],
    [{ n: 0 }, 'n'],
    [{ n: 100 }, 'n'],
    [{ n: 1.5 }, 'n'],
    [{ n: '2' }, 'n'],
    [{ max_tokens: -1 }, 'max_tokens'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ max_tokens: 'a' }, 'max_tokens'],
    [{ max_tokens: 1e300 }, 'max_tokens'],
    [{ logprobs: 50 }, 'logprobs'],
    [{ logprobs: -1 }, 'logprobs'],
    [{ logprobs: true }, 'logprobs'],
    [{ stream: 'yes' }, 'stream'],
    [{ stream_options: 1 }, 'stream_options'],
    [{ echo: 1 }, 'echo'],
    [{ seed: 'x' }, 'seed'],
    [{ seed: 1.5 }, 'seed'],
    [{ stop: 5 }, 'stop'],
    [{ stop: [''] }, 'stop'],
    [{ stop: ['a', 3] }, 'stop'],
    [{ stop: Array.from({ length: 100 }, (_, i) => `s${i}`) }, 'stop'],
    [{ logit_bias: [1] }, 'logit_bias'],
    [{ logit_bias: { 100000: 1 } }, 'logit_bias'],
    [{ logit_bias: { 512: 1 } }, 'logit_bias'],
    [{ logit_bias: { '-1': 1 } }, 'logit_bias'],
    [{ logit_bias: { abc: 1 } }, 'logit_bias'],
    [{ logit_bias: { 5: 200 } }, 'logit_bias'],
    [{ logit_bias: { 5: 'x' } }, 'logit_bias'],
    [{ model: 5 }, 'model'],
  ];
  for (const [patch, param] of completionCases) {
    test(`completions ${JSON.stringify(patch).slice(0, 70)}`, async () => {
      const body = { ...COMPLETION, ...patch };
      if ('prompt' in patch === false && Object.keys(patch).length === 0) delete body.prompt;
      await expectError('/v1/completions', body, 400, { param });
    });
  }

  const chatCases = [
    [{ messages: [] }, 'messages'],
    [{ messages: 'hi' }, 'messages'],
    [{ messages: undefined }, 'messages'],
    [{ messages: [{ role: 'wizard', content: 'hi' }] }, 'messages[0].role'],
    [{ messages: [{ content: 'hi' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'user', content: 'a' }, { role: 5, content: 'b' }] }, 'messages[1].role'],
    [{ messages: [{ role: 'user' }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, undefined],
    [{ messages: ['hi'] }, 'messages[0]'],
    [{ temperature: 3 }, 'temperature'],
    [{ top_p: 0 }, 'top_p'],
    [{ n: 0 }, 'n'],
    [{ n: 100 }, 'n'],
    [{ max_tokens: -1 }, 'max_tokens'],
    [{ max_tokens: 'a' }, 'max_tokens'],
    [{ max_completion_tokens: 0 }, 'max_completion_tokens'],
    [{ logprobs: 3 }, 'logprobs'],
    [{ logprobs: true, top_logprobs: 50 }, 'top_logprobs'],
    [{ top_logprobs: 2 }, 'top_logprobs'],
    [{ logit_bias: { 100000: 1 } }, 'logit_bias'],
    [{ tools: {} }, 'tools'],
  ];
  for (const [patch, param] of chatCases) {
    test(`chat ${JSON.stringify(patch).slice(0, 70)}`, async () => {
      await expectError('/v1/chat/completions', { ...CHAT, ...patch }, 400, param ? { param } : {});
    });
  }

  test('tokenize / detokenize field errors', async () => {
    await expectError('/tokenize', {}, 400, { param: 'content' });
    await expectError('/tokenize', { content: 5 }, 400, { param: 'content' });
    await expectError('/detokenize', { tokens: 'abc' }, 400, { param: 'tokens' });
    await expectError('/detokenize', { tokens: [1, 99999] }, 400, { param: 'tokens' });
    await expectError('/detokenize', { tokens: [1, -5] }, 400, { param: 'tokens' });
  });
});

describe('404, 405, 431, and the model field', () => {
  test('unknown routes are 404', async () => {
    for (const [method, path] of [
      ['GET', '/assets/'],
      ['GET', '/assets/../../etc/passwd'],
      ['GET', '/index.html'],
      ['GET', '/v1'],
      ['POST', '/v1/embeddings'],
      ['GET', '/v1/completions/x'],
      ['GET', '/../etc/passwd'],
      ['GET', '/health/../metrics'],
    ]) {
      const r = await server.request(path, { method });
      assertApiError(r, 404, { type: 'not_found_error' });
    }
    await assertStillServes(server, '404s');
  });

  test('an unknown model name is 404', async () => {
    const e = await expectError('/v1/completions', { ...COMPLETION, model: 'gpt-4' }, 404, { param: 'model', code: 'model_not_found' });
    assert.match(e.message, /gpt-4/);
    await expectError('/v1/chat/completions', { ...CHAT, model: 'llama' }, 404, { param: 'model' });
  });

  test('a wrong method is 405', async () => {
    for (const [method, path] of [
      ['GET', '/v1/completions'],
      ['GET', '/v1/chat/completions'],
      ['PUT', '/v1/completions'],
      ['DELETE', '/v1/chat/completions'],
      ['POST', '/v1/models'],
      ['POST', '/health'],
      ['POST', '/metrics'],
      ['GET', '/tokenize'],
    ]) {
      const r = await server.request(path, { method, body: method === 'GET' ? undefined : '{}' });
      assertApiError(r, 405);
    }
    await assertStillServes(server, '405s');
  });

  test('HEAD /health answers without a body', async () => {
    // A body after a HEAD response would be read as the next response on a keep-alive connection.
    const r = await rawExchange(server.port, 'HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const first = r.data.slice(0, r.data.indexOf('\r\n\r\n') + 4);
    assert.match(first, /^HTTP\/1\.1 200 /);
    const rest = r.data.slice(first.length);
    assert.match(rest, /^HTTP\/1\.1 200 /, `bytes after the HEAD response's headers: ${JSON.stringify(rest.slice(0, 40))}`);
  });

  test('huge headers are 431', async () => {
    const r = await server.request('/health', { headers: { 'X-Big': 'a'.repeat(64 * 1024) } });
    assertApiError(r, 431);
    // Many small headers add up too.
    const many = {};
    for (let i = 0; i < 2000; i++) many[`X-H${i}`] = 'v'.repeat(16);
    const r2 = await server.request('/v1/models', { headers: many });
    assertApiError(r2, 431);
    // A huge request line.
    const r3 = await rawExchange(server.port, `GET /${'a'.repeat(64 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.ok(r3.status === 431 || r3.status === 414 || r3.status === 400, `huge request line: ${r3.data.slice(0, 200)}`);
    await assertStillServes(server, '431s');
  });

  test('malformed HTTP is 400 and closed', async () => {
    for (const bytes of [
      'HELLO\r\n\r\n',
      'GET /health HTTP/9.9\r\n\r\n',
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello',
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      '\x00\x01\x02\x03\r\n\r\n',
    ]) {
      const r = await rawExchange(server.port, bytes);
      assert.ok(r.closed, `connection not closed after ${JSON.stringify(bytes)}`);
      if (r.status !== null) assert.equal(r.status, 400, `${JSON.stringify(bytes)} -> ${r.data.slice(0, 200)}`);
    }
    await assertStillServes(server, 'malformed HTTP');
  });

  test('keep-alive: several requests on one connection, and pipelining', async () => {
    const body = JSON.stringify(COMPLETION);
    const one = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const r = await rawExchange(server.port, one + one + `GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const statuses = [...r.data.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    assert.deepEqual(statuses, [200, 200, 200], r.data.slice(0, 500));
    const last = parseRawResponse(r.data.slice(r.data.lastIndexOf('HTTP/1.1 ')));
    assert.equal(last.body, '{"status":"ok"}');
  });

  test('errors count in lumen_http_requests_total', async () => {
    const m = await server.metrics();
    for (const s of [200, 400, 404, 405]) assert.match(m, new RegExp(`lumen_http_requests_total\\{status="${s}"\\} [1-9]`));
  });
});
