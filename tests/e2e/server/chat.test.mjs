// /v1/chat/completions through the official openai client, on a server started with the
// built-in ChatML template (stories260K has no chat template of its own).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { assertApiError, assertStillServes, startServer } from './helpers.mjs';

const MESSAGES = [{ role: 'user', content: 'Tell me a story about a dog.' }];
let server;
let client;

before(async () => {
  server = await startServer(['--chat-template', 'chatml']);
  client = server.client();
});
after(async () => {
  await server?.stop();
});

const chat = (extra = {}) =>
  client.chat.completions.create({ model: 'stories260K', messages: MESSAGES, max_tokens: 24, temperature: 0, ...extra });

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

describe('chat completions (chatml)', () => {
  test('the server reports the chatml template', () => {
    assert.match(server.stderr(), /chat template: .*chatml/i);
  });

  test('greedy chat: message, finish_reason, usage; deterministic', async () => {
    const a = await chat();
    assert.equal(a.object, 'chat.completion');
    assert.match(a.id, /^chatcmpl-/);
    assert.equal(a.choices.length, 1);
    const m = a.choices[0].message;
    assert.equal(m.role, 'assistant');
    assert.equal(typeof m.content, 'string');
    assert.ok(['length', 'stop'].includes(a.choices[0].finish_reason));
    assert.ok(a.usage.completion_tokens >= 1 && a.usage.completion_tokens <= 24);
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
    const b = await chat();
    assert.equal(b.choices[0].message.content, m.content);
  });

  test('the prompt is the ChatML rendering of the conversation', async () => {
    const messages = [
      { role: 'system', content: 'You are a storyteller.' },
      { role: 'user', content: 'Hi' },
    ];
    const r = await chat({ messages, max_tokens: 1 });
    const text = '<|im_start|>system\nYou are a storyteller.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n';
    const tok = await server.post('/tokenize', { content: text });
    assert.equal(r.usage.prompt_tokens, tok.json.tokens.length);
    // "developer" is the system role by its newer name; content parts are joined.
    const dev = await chat({
      messages: [
        { role: 'developer', content: 'You are a storyteller.' },
        { role: 'user', content: [{ type: 'text', text: 'H' }, { type: 'text', text: 'i' }] },
      ],
      max_tokens: 1,
    });
    assert.equal(dev.usage.prompt_tokens, r.usage.prompt_tokens);
    assert.equal(dev.choices[0].message.content, r.choices[0].message.content);
  });

  test('max_completion_tokens bounds the completion', async () => {
    const r = await chat({ max_tokens: undefined, max_completion_tokens: 3, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 3);
    assert.equal(r.choices[0].finish_reason, 'length');
  });

  test('streaming with usage: role first, content deltas, a usage chunk last', async () => {
    const whole = await chat();
    const chunks = await collect(await chat({ stream: true, stream_options: { include_usage: true } }));
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, whole.usage.completion_tokens);
    assert.equal(last.usage.prompt_tokens, whole.usage.prompt_tokens);
    const body = chunks.slice(0, -1);
    assert.equal(body.map((c) => c.choices[0].delta.content ?? '').join(''), whole.choices[0].message.content);
    assert.equal(body.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
  });

  test('n = 2 with a seed: choice i equals a lone request with seed + i', async () => {
    const req = { temperature: 1, seed: 77, max_tokens: 16 };
    const two = await chat({ ...req, n: 2 });
    assert.equal(two.choices.length, 2);
    const s0 = await chat(req);
    const s1 = await chat({ ...req, seed: 78 });
    assert.equal(two.choices[0].message.content, s0.choices[0].message.content);
    assert.equal(two.choices[1].message.content, s1.choices[0].message.content);
    // Streamed, each index assembles the same text.
    const chunks = await collect(await chat({ ...req, n: 2, stream: true }));
    const texts = ['', ''];
    for (const c of chunks) for (const ch of c.choices) texts[ch.index] += ch.delta.content ?? '';
    assert.deepEqual(texts, two.choices.map((c) => c.message.content));
  });

  test('seed reproducibility', async () => {
    const a = await chat({ temperature: 1, seed: 5 });
    const b = await chat({ temperature: 1, seed: 5 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  });

  test('logprobs with top_logprobs', async () => {
    const r = await chat({ logprobs: true, top_logprobs: 2, max_tokens: 8, ignore_eos: true });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    // (An end-of-text token that ignore_eos lets through shows in logprobs, maybe not in the text.)
    const noEos = (t) => t.replaceAll('</s>', '');
    assert.equal(noEos(content.map((t) => t.token).join('')), noEos(r.choices[0].message.content));
    for (const t of content) {
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.ok(t.top_logprobs.length >= 1 && t.top_logprobs.length <= 2);
      assert.ok(Math.abs(t.logprob - Math.max(...t.top_logprobs.map((x) => x.logprob))) < 1e-4, 'greedy: the chosen token is the top one');
    }
    const none = await chat({ max_tokens: 4 });
    assert.equal(none.choices[0].logprobs ?? null, null);
  });

  test('stop strings', async () => {
    const full = (await chat({ max_tokens: 48, ignore_eos: true })).choices[0].message.content;
    assert.ok(full.length >= 16, `greedy text too short: ${JSON.stringify(full)}`);
    // Four characters from the middle: the reply must end right before their first occurrence.
    const mid = Math.floor(full.length / 2);
    const stop = full.slice(mid, mid + 4);
    const r = await chat({ max_tokens: 48, ignore_eos: true, stop: [stop] });
    assert.equal(r.choices[0].message.content, full.slice(0, full.indexOf(stop)));
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  test('invalid conversations are 400', async () => {
    await assert.rejects(chat({ messages: [] }), (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
    await assert.rejects(
      chat({ messages: [{ role: 'wizard', content: 'hi' }] }),
      (e) => e instanceof OpenAI.BadRequestError && /role/.test(e.param),
    );
    await assert.rejects(chat({ top_logprobs: 2 }), (e) => e instanceof OpenAI.BadRequestError && e.param === 'top_logprobs');
    const r = await server.post('/v1/chat/completions', { messages: [{ role: 'user' }] });
    assertApiError(r, 400);
    await assertStillServes(server, 'invalid conversations');
  });
});
