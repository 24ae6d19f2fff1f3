// /v1/completions (and /v1/models, /tokenize, /detokenize) through the official openai client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import OpenAI from 'openai';
import { assertStillServes, leadByteToken, startServer } from './helpers.mjs';

const PROMPT = 'Once upon a time';
let server;
let client;

before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => {
  await server?.stop();
});

const greedy = (extra = {}) =>
  client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 32, temperature: 0, ...extra });

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

describe('completions', () => {
  test('greedy completion: text, finish_reason, usage, timings; deterministic', async () => {
    const a = await greedy();
    assert.equal(a.object, 'text_completion');
    assert.match(a.id, /^cmpl-/);
    assert.equal(a.model, 'stories260K');
    assert.equal(a.choices.length, 1);
    const c = a.choices[0];
    assert.equal(c.index, 0);
    assert.equal(typeof c.text, 'string');
    assert.ok(c.text.length > 0);
    assert.ok(['length', 'stop'].includes(c.finish_reason));
    const tok = await server.post('/tokenize', { content: PROMPT });
    assert.equal(a.usage.prompt_tokens, tok.json.tokens.length);
    assert.ok(a.usage.completion_tokens >= 1 && a.usage.completion_tokens <= 32);
    if (c.finish_reason === 'length') assert.equal(a.usage.completion_tokens, 32);
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
    assert.equal(typeof a.usage.prompt_tokens_details.cached_tokens, 'number');
    assert.equal(typeof a.timings, 'object');
    for (const k of ['queue_ms', 'ttft_ms', 'prompt_tokens', 'generated_tokens', 'total_ms'])
      assert.equal(typeof a.timings[k], 'number', `timings.${k}`);
    const b = await greedy();
    assert.equal(b.choices[0].text, c.text, 'temperature 0 must be deterministic');
    assert.notEqual(b.id, a.id);
  });

  test('default max_tokens is 16', async () => {
    const r = await client.completions.create({ model: 'stories260K', prompt: PROMPT, temperature: 0, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 16);
    assert.equal(r.choices[0].finish_reason, 'length');
  });

  test('the model may be named by alias, file name or omitted; an unknown one is 404', async () => {
    for (const model of ['stories260K', 'stories260K.gguf', undefined]) {
      const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: 2, temperature: 0 });
      assert.equal(r.choices.length, 1);
    }
    await assert.rejects(
      client.completions.create({ model: 'gpt-4o', prompt: PROMPT, max_tokens: 2 }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.param === 'model',
    );
  });

  test('prompt as token ids equals the same prompt as text', async () => {
    const tok = await server.post('/tokenize', { content: PROMPT });
    const ids = tok.json.tokens;
    const fromIds = await greedy({ prompt: ids });
    const fromText = await greedy();
    assert.equal(fromIds.choices[0].text, fromText.choices[0].text);
    assert.equal(fromIds.usage.prompt_tokens, ids.length);
  });

  test('a list of prompts with n = 2: choice index = prompt * n + i', async () => {
    const prompts = ['Once upon a time', 'The little dog'];
    const r = await client.completions.create({
      model: 'stories260K',
      prompt: prompts,
      n: 2,
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(r.choices.length, 4);
    assert.deepEqual(
      r.choices.map((c) => c.index),
      [0, 1, 2, 3],
    );
    for (let p = 0; p < 2; p++) {
      const alone = await client.completions.create({ model: 'stories260K', prompt: prompts[p], max_tokens: 8, temperature: 0 });
      assert.equal(r.choices[2 * p].text, alone.choices[0].text);
      assert.equal(r.choices[2 * p + 1].text, alone.choices[0].text, 'greedy: both completions are the same');
    }
  });

  test('echo puts the prompt before the completion', async () => {
    const r = await greedy({ echo: true, max_tokens: 8 });
    const plain = await greedy({ max_tokens: 8 });
    assert.equal(r.choices[0].text, PROMPT + plain.choices[0].text);
    const chunks = await collect(await greedy({ echo: true, max_tokens: 8, stream: true }));
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), PROMPT + plain.choices[0].text);
  });

  test('n = 2 with a seed: completion i equals a lone request with seed + i', async () => {
    const req = { model: 'stories260K', prompt: PROMPT, max_tokens: 24, temperature: 1, seed: 1234 };
    const two = await client.completions.create({ ...req, n: 2 });
    assert.equal(two.choices.length, 2);
    assert.deepEqual(
      two.choices.map((c) => c.index),
      [0, 1],
    );
    const s0 = await client.completions.create(req);
    const s1 = await client.completions.create({ ...req, seed: 1235 });
    assert.equal(two.choices[0].text, s0.choices[0].text);
    assert.equal(two.choices[1].text, s1.choices[0].text);
    // The prompt is counted once, the completions each.
    assert.equal(two.usage.prompt_tokens, s0.usage.prompt_tokens);
    assert.equal(two.usage.completion_tokens, s0.usage.completion_tokens + s1.usage.completion_tokens);
  });

  test('seed reproducibility at temperature 1; different seeds differ', async () => {
    const req = { model: 'stories260K', prompt: PROMPT, max_tokens: 32, temperature: 1, top_p: 0.95 };
    const a = await client.completions.create({ ...req, seed: 42 });
    const b = await client.completions.create({ ...req, seed: 42 });
    assert.equal(a.choices[0].text, b.choices[0].text);
    const texts = new Set([a.choices[0].text]);
    for (const seed of [1, 2, 3, 4]) texts.add((await client.completions.create({ ...req, seed })).choices[0].text);
    assert.ok(texts.size >= 2, 'five seeds gave one text: sampling ignores the seed');
    // Also with streaming: the same seed streams the same text.
    const chunks = await collect(await client.completions.create({ ...req, seed: 42, stream: true }));
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), a.choices[0].text);
  });

  test('stop strings: the text ends before the first stop, finish_reason stop', async () => {
    const full = (await greedy({ max_tokens: 48, ignore_eos: true })).choices[0].text;
    // A word from the middle of the greedy text as the stop string.
    const words = full.split(' ').filter((w) => /^[a-z]{3,}$/.test(w));
    assert.ok(words.length >= 3, `greedy text too short to pick a stop string: ${JSON.stringify(full)}`);
    const stop = ` ${words[Math.floor(words.length / 2)]}`;
    const expected = full.slice(0, full.indexOf(stop));
    const r = await greedy({ max_tokens: 48, stop: ['never-occurs-xyz', stop], ignore_eos: true });
    assert.equal(r.choices[0].text, expected);
    assert.equal(r.choices[0].finish_reason, 'stop');
    // A single string works too, and streaming never shows any part of the stop string.
    const r2 = await greedy({ max_tokens: 48, stop, ignore_eos: true });
    assert.equal(r2.choices[0].text, expected);
    const chunks = await collect(await greedy({ max_tokens: 48, stop, ignore_eos: true, stream: true }));
    const streamed = chunks.map((c) => c.choices[0]?.text ?? '').join('');
    assert.equal(streamed, expected);
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
  });

  test('logprobs: one entry per token, top-k alternatives, greedy picks the best', async () => {
    const r = await greedy({ max_tokens: 12, logprobs: 3, ignore_eos: true });
    const c = r.choices[0];
    const lp = c.logprobs;
    assert.ok(lp, 'logprobs missing');
    assert.equal(lp.tokens.length, r.usage.completion_tokens);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    assert.equal(lp.top_logprobs.length, lp.tokens.length);
    assert.equal(lp.text_offset.length, lp.tokens.length);
    assert.equal(lp.tokens.join(''), c.text);
    assert.equal(lp.text_offset[0], 0);
    for (let i = 0; i < lp.tokens.length; i++) {
      const top = lp.top_logprobs[i];
      const vals = Object.values(top);
      assert.ok(vals.length >= 1 && vals.length <= 3, `top_logprobs[${i}] has ${vals.length} entries`);
      assert.ok(lp.token_logprobs[i] <= 0 && Number.isFinite(lp.token_logprobs[i]));
      for (const v of vals) assert.ok(v <= 0 && Number.isFinite(v));
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(lp.token_logprobs[i] - Math.max(...vals)) < 1e-4, `token ${i} is not the argmax`);
      if (i > 0) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length);
    }
    // The same through a stream.
    const chunks = await collect(await greedy({ max_tokens: 12, logprobs: 3, ignore_eos: true, stream: true }));
    const sTokens = chunks.flatMap((ch) => ch.choices[0]?.logprobs?.tokens ?? []);
    const sLps = chunks.flatMap((ch) => ch.choices[0]?.logprobs?.token_logprobs ?? []);
    assert.deepEqual(sTokens, lp.tokens);
    assert.equal(sLps.length, lp.token_logprobs.length);
    for (let i = 0; i < sLps.length; i++) assert.ok(Math.abs(sLps[i] - lp.token_logprobs[i]) < 1e-5);
  });

  test('logit_bias steers generation', async () => {
    const tok = await server.post('/tokenize', { content: 'the', add_special: false, with_pieces: true });
    const { id, piece } = tok.json.tokens.at(-1);
    assert.equal(piece, ' the');
    const r = await greedy({ max_tokens: 4, logit_bias: { [id]: 100 } });
    assert.equal(r.choices[0].text, ' the the the the');
    // A bias of -100 bans a token: the greedy text without its first token.
    const plain = await greedy({ max_tokens: 1, logprobs: 1 });
    const first = plain.choices[0].logprobs.tokens[0];
    const firstId = (await server.post('/tokenize', { content: first, add_special: false, with_pieces: true })).json.tokens.find(
      (t) => t.piece === first,
    )?.id;
    if (firstId !== undefined) {
      const banned = await greedy({ max_tokens: 1, logit_bias: { [firstId]: -100 } });
      assert.notEqual(banned.choices[0].text, plain.choices[0].text);
    }
  });

  test('generated text that is not valid UTF-8 is still answered 200', async () => {
    const lead = await leadByteToken(server);
    const req = { max_tokens: 5, logit_bias: { [lead]: 100 }, ignore_eos: true };
    const r = await greedy(req);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 5);
    assert.equal(typeof r.choices[0].text, 'string');
    const chunks = await collect(await greedy({ ...req, stream: true }));
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
    // The bytes on the wire are valid UTF-8, whole and streamed (the client would hide it).
    for (const [stream, logprobs] of [[false, undefined], [true, undefined], [false, 2], [true, 2]]) {
      const raw = await server.post('/v1/completions', { prompt: PROMPT, ...req, stream, logprobs, temperature: 0 });
      assert.equal(raw.status, 200, raw.text);
      assert.ok(isUtf8(raw.raw), `${stream ? 'streamed' : 'whole'} response is not valid UTF-8`);
    }
    // A prompt of broken UTF-8 (token ids) echoed back.
    const e = await greedy({ prompt: [1, lead, lead], echo: true, max_tokens: 2 });
    assert.equal(typeof e.choices[0].text, 'string');
    await assertStillServes(server, 'invalid UTF-8 output');
  });

  test('prefix cache: a repeated long prompt reports cached tokens', async () => {
    const prompt = 'Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends every day.';
    const a = await client.completions.create({ model: 'stories260K', prompt, max_tokens: 4, temperature: 0 });
    const b = await client.completions.create({ model: 'stories260K', prompt, max_tokens: 4, temperature: 0 });
    assert.ok(a.usage.prompt_tokens > 32, `prompt has only ${a.usage.prompt_tokens} tokens`);
    assert.ok(b.usage.prompt_tokens_details.cached_tokens > 0, 'no cached tokens on the second run');
    assert.ok(b.usage.prompt_tokens_details.cached_tokens < b.usage.prompt_tokens);
    assert.equal(b.choices[0].text, a.choices[0].text);
  });
});

describe('streaming', () => {
  test('streamed text equals the whole response; usage in a last chunk with no choices', async () => {
    const whole = await greedy();
    const chunks = await collect(await greedy({ stream: true, stream_options: { include_usage: true } }));
    assert.ok(chunks.length >= 3);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual(
      { ...last.usage, prompt_tokens_details: undefined },
      { ...whole.usage, prompt_tokens_details: undefined },
    );
    const body = chunks.slice(0, -1);
    for (const c of body) {
      assert.equal(c.object, 'text_completion');
      assert.equal(c.id, chunks[0].id);
      assert.equal(c.usage, null, 'usage is null in the chunks before the last');
    }
    assert.equal(body.map((c) => c.choices[0].text).join(''), whole.choices[0].text);
    assert.equal(body.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
    for (const c of body.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  });

  test('without include_usage there is no usage chunk', async () => {
    const chunks = await collect(await greedy({ stream: true, max_tokens: 8 }));
    for (const c of chunks) {
      assert.equal(c.choices.length, 1);
      assert.ok(c.usage === undefined || c.usage === null);
    }
  });

  test('n = 2 streamed: each index assembles its own completion', async () => {
    const req = { model: 'stories260K', prompt: PROMPT, max_tokens: 16, temperature: 0.8, seed: 99, n: 2 };
    const whole = await client.completions.create(req);
    const chunks = await collect(await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
    const texts = ['', ''];
    const finished = [0, 0];
    for (const c of chunks)
      for (const ch of c.choices) {
        texts[ch.index] += ch.text;
        if (ch.finish_reason) finished[ch.index]++;
      }
    assert.deepEqual(finished, [1, 1]);
    assert.deepEqual(texts, whole.choices.map((c) => c.text));
    assert.equal(chunks.at(-1).usage.completion_tokens, whole.usage.completion_tokens);
  });
});

describe('other routes', () => {
  test('/v1/models lists the model', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    assert.equal(models.length, 1);
    assert.equal(models[0].id, 'stories260K');
    assert.equal(models[0].object, 'model');
  });

  test('/tokenize and /detokenize round-trip', async () => {
    const text = 'Once upon a time, there was a dog.';
    const t = await server.post('/tokenize', { content: text });
    assert.equal(t.status, 200);
    assert.ok(Array.isArray(t.json.tokens) && t.json.tokens.every(Number.isInteger));
    const noBos = await server.post('/tokenize', { content: text, add_special: false });
    assert.equal(noBos.json.tokens.length, t.json.tokens.length - 1);
    const d = await server.post('/detokenize', { tokens: noBos.json.tokens });
    assert.equal(d.status, 200);
    assert.equal(d.json.content.trim(), text);
  });

  test('chat without a chat template is a 400 naming the fix', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /chat template/.test(e.message),
    );
    await assertStillServes(server, 'chat without a template');
  });

  test('50 KB requests succeed', async () => {
    const text = 'Once upon a time there was a little dog who liked to run. '.repeat(900).slice(0, 50000);
    const t = await server.post('/tokenize', { content: text });
    assert.equal(t.status, 200, t.text.slice(0, 300));
    assert.ok(t.json.tokens.length > 5000);
    // A 50 KB completions body (the bulk in a field the server ignores for generation).
    const r = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 4, temperature: 0, user: text });
    assert.equal(r.choices.length, 1);
    await assertStillServes(server, '50 KB bodies');
  });
});
