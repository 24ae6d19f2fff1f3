// Speculative decoding behind the server: with a draft model (here the target itself, so every
// draft is accepted) greedy completions, plain and streamed, are the plain server's; the
// timings carry `spec`; /metrics counts drafts and passes promtool; no KV block is left.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { MODEL, metricValue, startServer, waitForIdle } from './helpers.mjs';

const PROMTOOL = process.env.PROMTOOL || '/usr/bin/promtool';
const PROMPTS = ['Once upon a time', 'Lily and Tom went to the park. Lily and Tom went to the', 'The little dog'];
let plain;
let spec;

before(async () => {
  plain = await startServer();
  spec = await startServer(['--draft-model', MODEL, '--spec-tokens', '4', '--spec-always']);
});
after(async () => {
  await plain?.stop();
  await spec?.stop();
});

const complete = (server, prompt, extra = {}) =>
  server.client().completions.create({ model: 'stories260K', prompt, max_tokens: 40, temperature: 0, ...extra });

describe('speculative decoding', () => {
  test('greedy completions with a draft model equal the plain ones; timings.spec', async () => {
    for (const prompt of PROMPTS) {
      const a = await complete(plain, prompt);
      const b = await complete(spec, prompt);
      assert.equal(b.choices[0].text, a.choices[0].text, prompt);
      assert.equal(b.usage.completion_tokens, a.usage.completion_tokens);
      assert.equal(a.timings.spec, undefined);
      const s = b.timings.spec;
      assert.equal(typeof s, 'object', 'timings.spec');
      for (const k of ['proposed', 'accepted', 'acceptance_rate', 'tokens_per_target_pass']) assert.equal(typeof s[k], 'number', k);
      assert.ok(s.proposed > 0 && s.accepted === s.proposed, 'the target as its own draft is accepted everywhere');
      assert.ok(s.tokens_per_target_pass > 1.5);
      assert.ok(Array.isArray(s.acceptance_rate_per_position) && s.acceptance_rate_per_position.every((r) => r === 1));
    }
  });

  test('streamed and concurrent: the same texts', async () => {
    const want = [];
    for (const prompt of PROMPTS) want.push((await complete(plain, prompt)).choices[0].text);
    const got = await Promise.all(
      PROMPTS.map(async (prompt) => {
        const stream = await complete(spec, prompt, { stream: true });
        let text = '';
        for await (const c of stream) text += c.choices[0]?.text ?? '';
        return text;
      }),
    );
    assert.deepEqual(got, want);
  });

  test('/metrics counts drafts and passes promtool; no KV block left', async () => {
    const text = await waitForIdle(spec);
    assert.ok(metricValue(text, 'lumen_spec_decode_num_draft_tokens_total') > 0);
    assert.equal(
      metricValue(text, 'lumen_spec_decode_num_accepted_tokens_total'),
      metricValue(text, 'lumen_spec_decode_num_draft_tokens_total'),
    );
    assert.ok(metricValue(text, 'lumen_spec_decode_num_accepted_tokens_per_pos_total', { position: '0' }) > 0);
    assert.equal(metricValue(text, 'lumen_kv_cache_blocks_used'), 0);
    if (existsSync(PROMTOOL)) {
      const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
      assert.equal(r.status, 0, `promtool check metrics failed:\n${r.stdout}\n${r.stderr}`);
    }
  });
});
