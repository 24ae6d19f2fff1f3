// Structured output through the official openai client: response_format (json_schema,
// json_object) and the grammar extension on both endpoints, tool calls (required, named, auto,
// none; plain and streamed) with the built-in ChatML template (Hermes calls) and with the shared
// Llama 3.1 and Mistral Nemo templates. The model is stories260K, which knows nothing of JSON:
// every well-formed output is the grammar's doing, so outputs are sampled (temperature 1, several
// seeds) and checked against the schema by hand.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import { LUMEN_SHARED, assertApiError, assertStillServes, startServer } from './helpers.mjs';

const SEEDS = [1, 2, 3, 4];
const MESSAGES = [{ role: 'user', content: 'Tell me about a dog.' }];

// Strings carry maxLength, so a tiny model's outputs end well within max_tokens.
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    kind: { enum: ['dog', 'cat'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
  },
  required: ['name', 'age'],
  additionalProperties: false,
};

function checkPerson(v, what) {
  assert.equal(typeof v, 'object', what);
  assert.ok(v !== null && !Array.isArray(v), what);
  for (const k of Object.keys(v)) assert.ok(k in PERSON.properties, `${what}: unexpected member ${k}`);
  assert.equal(typeof v.name, 'string', what);
  assert.ok([...v.name].length <= 12, what);
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, `${what}: age ${v.age}`);
  if ('kind' in v) assert.ok(['dog', 'cat'].includes(v.kind), what);
  if ('tags' in v) {
    assert.ok(Array.isArray(v.tags) && v.tags.length <= 3, what);
    for (const t of v.tags) assert.ok(typeof t === 'string' && [...t].length <= 6, what);
  }
}

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};
const ADD = {
  type: 'function',
  function: {
    name: 'add',
    description: 'Adds two integers.',
    parameters: {
      type: 'object',
      properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } },
      required: ['a', 'b'],
      additionalProperties: false,
    },
  },
};

function checkCall(call, what) {
  assert.equal(call.type, 'function', what);
  assert.equal(typeof call.id, 'string', what);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    assert.deepEqual(Object.keys(args).filter((k) => !['city', 'unit'].includes(k)), [], what);
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 10, what);
    if ('unit' in args) assert.ok(['c', 'f'].includes(args.unit), what);
  } else {
    assert.equal(call.function.name, 'add', what);
    assert.deepEqual(Object.keys(args).sort(), ['a', 'b'], what);
    for (const k of ['a', 'b']) assert.ok(Number.isInteger(args[k]) && Math.abs(args[k]) <= 99, what);
  }
  return args;
}

// Assembles a streamed chat completion as OpenAI's clients do.
async function assemble(stream) {
  let content = '';
  let finish = null;
  const calls = [];
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    content += ch.delta.content ?? '';
    for (const d of ch.delta.tool_calls ?? []) {
      if (!calls[d.index]) {
        assert.ok(d.id && d.type === 'function' && d.function.name, `the first delta of call ${d.index} names it`);
        calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
      }
      calls[d.index].function.arguments += d.function?.arguments ?? '';
    }
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  return { content, finish, calls };
}

let server;
let client;
before(async () => {
  server = await startServer(['--chat-template', 'chatml']);
  client = server.client();
});
after(async () => {
  await server?.stop();
});

const chat = (extra = {}) => client.chat.completions.create({ model: 'stories260K', messages: MESSAGES, max_tokens: 160, temperature: 1, ...extra });

describe('response_format and grammar', () => {
  const jsonSchema = { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } };

  test('json_schema on chat: the content is a document of the schema', async () => {
    for (const seed of SEEDS) {
      const r = await chat({ response_format: jsonSchema, seed });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', `seed ${seed}: ${c.message.content}`);
      checkPerson(JSON.parse(c.message.content), `seed ${seed}: ${c.message.content}`);
    }
  });

  test('json_schema on completions, and streamed', async () => {
    for (const seed of SEEDS) {
      const r = await client.completions.create({
        model: 'stories260K', prompt: 'Once upon a time', max_tokens: 160, temperature: 1, seed, response_format: jsonSchema,
      });
      checkPerson(JSON.parse(r.choices[0].text), `seed ${seed}: ${r.choices[0].text}`);
    }
    const { content, finish } = await assemble(await chat({ response_format: jsonSchema, seed: 9, stream: true }));
    assert.equal(finish, 'stop');
    checkPerson(JSON.parse(content), content);
  });

  test('json_object: the content is a JSON object', async () => {
    for (const seed of SEEDS) {
      const r = await chat({ response_format: { type: 'json_object' }, seed, max_tokens: 200 });
      const v = JSON.parse(r.choices[0].message.content);
      assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), r.choices[0].message.content);
    }
  });

  test('the grammar extension field', async () => {
    for (const seed of SEEDS) {
      const r = await chat({ grammar: 'root ::= ("yes" | "no") "!"{1,3}', seed });
      assert.match(r.choices[0].message.content, /^(yes|no)!{1,3}$/);
      const c = await client.completions.create({ model: 'stories260K', prompt: 'The dog', grammar: 'root ::= [0-9]{4}', seed, temperature: 1 });
      assert.match(c.choices[0].text, /^[0-9]{4}$/);
    }
  });

  test('an unsupported schema keyword is a 400 naming its path', async () => {
    const schema = { type: 'object', properties: { x: { type: 'string', foo: 1 } } };
    await assert.rejects(chat({ response_format: { type: 'json_schema', json_schema: { name: 's', schema } } }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, 'response_format.json_schema.schema');
      assert.match(e.message, /\$\.properties\.x\.foo/);
      return true;
    });
    await assertStillServes(server, 'an unsupported keyword');
  });

  test('malformed response_format and grammar are 400 naming the field', async () => {
    const cases = [
      [{ response_format: { type: 'xml' } }, 'response_format.type'],
      [{ response_format: { type: 'json_schema' } }, 'response_format.json_schema'],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'response_format.json_schema.schema'],
      [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 'object' } } }, 'response_format.json_schema.schema'],
      [{ grammar: 'root ::= (' }, 'grammar'],
      [{ grammar: 'root ::= "a"', response_format: { type: 'json_object' } }, 'grammar'],
    ];
    for (const [extra, param] of cases) {
      for (const p of ['/v1/chat/completions', '/v1/completions']) {
        const body = p === '/v1/completions' ? { prompt: 'x', ...extra } : { messages: MESSAGES, ...extra };
        assertApiError(await server.post(p, body), 400, { param });
      }
    }
    await assertStillServes(server, 'malformed response_format');
  });
});

describe('tool calls (built-in ChatML: Hermes calls)', () => {
  test('the server reports the tool-call format', () => {
    assert.match(server.stderr(), /tool calls: hermes/);
  });

  test('tool_choice "required": calls whose arguments follow the schema, finish_reason tool_calls', async () => {
    for (const seed of SEEDS) {
      const r = await chat({ tools: [WEATHER, ADD], tool_choice: 'required', seed });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
      assert.equal(c.message.content, null);
      // One call: parallel_tool_calls is off unless the request turns it on.
      assert.equal(c.message.tool_calls.length, 1);
      assert.match(c.message.tool_calls[0].id, /^call_[A-Za-z0-9]{24}$/);
      checkCall(c.message.tool_calls[0], `seed ${seed}`);
    }
    const ids = new Set();
    for (const seed of SEEDS) ids.add((await chat({ tools: [WEATHER], tool_choice: 'required', seed })).choices[0].message.tool_calls[0].id);
    assert.equal(ids.size, SEEDS.length, 'ids are unique');
  });

  test('streamed: tool-call deltas assemble into valid calls, and no call text comes as content', async () => {
    for (const seed of SEEDS) {
      const got = await assemble(await chat({ tools: [WEATHER, ADD], tool_choice: 'required', seed, stream: true }));
      assert.equal(got.finish, 'tool_calls');
      assert.equal(got.content, '');
      assert.equal(got.calls.length, 1);
      for (const call of got.calls) checkCall(call, `seed ${seed} (streamed)`);
      // The same seed unstreamed: the same calls.
      const whole = await chat({ tools: [WEATHER, ADD], tool_choice: 'required', seed });
      assert.deepEqual(got.calls.map((c) => [c.function.name, c.function.arguments]), whole.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]));
    }
  });

  test('a call the token budget closed: valid, with finish_reason length', async () => {
    // Near the end of max_tokens the engine completes the call by its shortest completion.
    const r = await chat({ tools: [WEATHER], tool_choice: 'required', seed: 1, max_tokens: 100 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'length', JSON.stringify(c));
    assert.equal(c.message.tool_calls.length, 1);
    checkCall(c.message.tool_calls[0], 'closed');
    assert.equal(c.message.content, null);
    const got = await assemble(await chat({ tools: [WEATHER], tool_choice: 'required', seed: 1, max_tokens: 100, stream: true }));
    assert.equal(got.finish, 'length');
    assert.deepEqual(got.calls.map((x) => x.function.arguments), [c.message.tool_calls[0].function.arguments]);
  });

  test('a named function: exactly one call of it', async () => {
    for (const seed of SEEDS) {
      const r = await chat({ tools: [WEATHER, ADD], tool_choice: { type: 'function', function: { name: 'add' } }, seed });
      const calls = r.choices[0].message.tool_calls;
      assert.equal(calls.length, 1);
      assert.equal(calls[0].function.name, 'add');
      checkCall(calls[0], `seed ${seed}`);
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
    }
  });

  test('tool_choice "auto" still answers, "none" answers with content', async () => {
    const auto = await chat({ tools: [WEATHER], seed: 3, max_tokens: 24 });
    const c = auto.choices[0];
    assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason));
    if (c.finish_reason === 'tool_calls') c.message.tool_calls.forEach((t) => checkCall(t, 'auto'));
    else assert.equal(typeof c.message.content, 'string');
    const streamed = await assemble(await chat({ tools: [WEATHER], seed: 3, max_tokens: 24, stream: true }));
    assert.equal(streamed.content, c.message.content ?? '');
    const none = await chat({ tools: [WEATHER], tool_choice: 'none', seed: 3, max_tokens: 24 });
    assert.equal(typeof none.choices[0].message.content, 'string');
    assert.equal(none.choices[0].message.tool_calls, undefined);
    // Tools are rendered either way: the prompt is longer than without them.
    const bare = await chat({ seed: 3, max_tokens: 1 });
    assert.ok(none.usage.prompt_tokens > bare.usage.prompt_tokens);
  });

  test('malformed tools and tool_choice are 400 naming the field', async () => {
    const cases = [
      [{ tools: [{ type: 'function', function: { name: 'bad name' } }] }, 'tools[0].function.name'],
      [{ tools: [WEATHER, WEATHER] }, 'tools[1].function.name'],
      [{ tools: [{ type: 'code_interpreter' }] }, 'tools[0].type'],
      [{ tools: [WEATHER], tool_choice: 'sometimes' }, 'tool_choice'],
      [{ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'add' } } }, 'tool_choice.function.name'],
      [{ tool_choice: 'required' }, 'tool_choice'],
      [{ tools: [WEATHER], tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice'],
      [
        { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'integer', multipleOf: 2 } } } } }], tool_choice: 'required' },
        'tools[0].function.parameters',
      ],
    ];
    for (const [extra, param] of cases) assertApiError(await server.post('/v1/chat/completions', { messages: MESSAGES, ...extra }), 400, { param });
    await assertStillServes(server, 'malformed tools');
  });
});

describe('tool calls with the shared templates', () => {
  const templates = [
    ['meta-llama-Llama-3.1-8B-Instruct.jinja', 'llama3-json', /^call_/],
    ['mistralai-Mistral-Nemo-Instruct-2407.jinja', 'mistral', /^[A-Za-z0-9]{9}$/],
  ];
  for (const [file, format, idPattern] of templates) {
    test(`${file}: ${format} calls, required and named`, async () => {
      const s = await startServer(['--chat-template', path.join(LUMEN_SHARED, 'chat-templates', file)]);
      try {
        assert.match(s.stderr(), new RegExp(`tool calls: ${format}`));
        const c = s.client();
        for (const seed of SEEDS.slice(0, 2)) {
          const r = await c.chat.completions.create({
            model: 'stories260K', messages: MESSAGES, max_tokens: 160, temperature: 1, seed, tools: [WEATHER, ADD], tool_choice: 'required',
          });
          assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
          for (const call of r.choices[0].message.tool_calls) {
            assert.match(call.id, idPattern);
            checkCall(call, `${file} seed ${seed}`);
          }
          const got = await assemble(
            await c.chat.completions.create({
              model: 'stories260K', messages: MESSAGES, max_tokens: 160, temperature: 1, seed, stream: true,
              tools: [WEATHER, ADD], tool_choice: { type: 'function', function: { name: 'get_weather' } },
            }),
          );
          assert.equal(got.finish, 'tool_calls');
          assert.equal(got.calls.length, 1);
          assert.equal(got.calls[0].function.name, 'get_weather');
          checkCall(got.calls[0], `${file} seed ${seed} (streamed)`);
        }
      } finally {
        await s.stop();
      }
    });
  }
});
