import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SSEParser, openAIChunks, readEventStream } from '../src/sse.js';

// Feeds chunks to a fresh parser; returns its events (and the parser).
function parse(chunks, { end = true } = {}) {
  const events = [];
  const p = new SSEParser((e) => events.push(e));
  for (const c of chunks) p.push(c);
  if (end) p.end();
  return { events, parser: p };
}

const STREAM =
  '\uFEFFdata: first\r\n\r\n' +
  ': a comment\n' +
  'event: update\r' +
  'id: 7\r\n' +
  'data: two\n' +
  'data:  lines\n' +
  'retry: 1500\n' +
  'unknown: field\n' +
  '\r' +
  'data\n' +
  '\n' +
  'id\n' +
  'data:{"x":1}\r\n' +
  '\r\n' +
  'data: unfinished';
const EXPECTED = [
  { event: 'message', data: 'first', id: '' },
  { event: 'update', data: 'two\n lines', id: '7' },
  { event: 'message', data: '', id: '7' },
  { event: 'message', data: '{"x":1}', id: '' },
];

test('the whole stream at once', () => {
  const { events, parser } = parse([STREAM]);
  assert.deepEqual(events, EXPECTED);
  assert.equal(parser.retry, 1500);
  assert.equal(parser.lastEventId, '');
});

test('every split into two chunks gives the same events', () => {
  for (let i = 0; i <= STREAM.length; i++) {
    const { events } = parse([STREAM.slice(0, i), STREAM.slice(i)]);
    assert.deepEqual(events, EXPECTED, `split at ${i}: ${JSON.stringify(STREAM.slice(0, i))}`);
  }
});

test('every split into three chunks gives the same events', () => {
  for (let i = 0; i <= STREAM.length; i++) {
    for (let j = i; j <= STREAM.length; j++) {
      const { events } = parse([STREAM.slice(0, i), STREAM.slice(i, j), STREAM.slice(j)]);
      assert.deepEqual(events, EXPECTED, `split at ${i}, ${j}`);
    }
  }
});

test('one character per chunk, with empty chunks between', () => {
  const chunks = [];
  for (const c of STREAM) chunks.push(c, '');
  assert.deepEqual(parse(chunks).events, EXPECTED);
});

test('CRLF, CR and LF line ends', () => {
  for (const eol of ['\r\n', '\r', '\n']) {
    const { events } = parse([`data: a${eol}data: b${eol}${eol}event: e${eol}data: c${eol}${eol}`]);
    assert.deepEqual(events, [
      { event: 'message', data: 'a\nb', id: '' },
      { event: 'e', data: 'c', id: '' },
    ], JSON.stringify(eol));
  }
});

test('a CR at the end of a chunk and the LF starting the next are one line end', () => {
  const { events } = parse(['data: a\r', '\ndata: b\r', '\n\r', '\n']);
  assert.deepEqual(events, [{ event: 'message', data: 'a\nb', id: '' }]);
  // ...but a CR then CR is two line ends, the second blank: a dispatch
  assert.deepEqual(parse(['data: a\r', '\r']).events, [{ event: 'message', data: 'a', id: '' }]);
  // and a CR whose next chunk does not start with LF ends the line by itself
  assert.deepEqual(parse(['data: a\r', 'data: b\r', '\r']).events, [{ event: 'message', data: 'a\nb', id: '' }]);
});

test('comments are ignored, even between data lines', () => {
  const { events } = parse([':hello\ndata: a\n: keep-alive\ndata: b\n:\n\n']);
  assert.deepEqual(events, [{ event: 'message', data: 'a\nb', id: '' }]);
});

test('only one leading space is removed from a value, and only a space', () => {
  const { events } = parse(['data:   three\ndata:\tt\ndata:\n\n']);
  assert.deepEqual(events.map((e) => e.data), ['  three\n\tt\n']);
});

test('the field name is everything before the first colon', () => {
  const { events } = parse(['data: a: b:c\nevent:x:y\n\n']);
  assert.deepEqual(events, [{ event: 'x:y', data: 'a: b:c', id: '' }]);
});

test('a BOM is stripped once, only at the very start', () => {
  assert.deepEqual(parse(['\uFEFFdata: a\n\n']).events.map((e) => e.data), ['a']);
  assert.deepEqual(parse(['', '\uFEFF', 'data: a\n\n']).events.map((e) => e.data), ['a']);
  // a second BOM is part of the first field name: '\uFEFFdata' is unknown
  assert.deepEqual(parse(['\uFEFF\uFEFFdata: a\n\ndata: b\n\n']).events.map((e) => e.data), ['b']);
  // a BOM later is data
  assert.deepEqual(parse(['data: \uFEFFa\n\n']).events.map((e) => e.data), ['\uFEFFa']);
});

test('"data" without a colon is a data line with an empty value', () => {
  assert.deepEqual(parse(['data\n\n']).events, [{ event: 'message', data: '', id: '' }]);
  assert.deepEqual(parse(['data\ndata\ndata\n\n']).events.map((e) => e.data), ['\n\n']);
});

test('a blank line with no data dispatches nothing, but resets the event type', () => {
  const { events } = parse(['event: a\n\ndata: x\n\n\n\n']);
  assert.deepEqual(events, [{ event: 'message', data: 'x', id: '' }]);
});

test('id sets the last event id; one with NUL is ignored; an empty one clears it', () => {
  const { events, parser } = parse(['id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\ndata: c\n\nid:\ndata: d\n\n']);
  assert.deepEqual(events.map((e) => e.id), ['1', '1', '1', '']);
  assert.equal(parser.lastEventId, '');
  // the id is kept without data too
  const r = parse(['id: 9\n\ndata: z\n\n']);
  assert.deepEqual(r.events, [{ event: 'message', data: 'z', id: '9' }]);
});

test('retry takes only ASCII digits', () => {
  const p = parse(['retry: 3000\n\n']).parser;
  assert.equal(p.retry, 3000);
  for (const bad of ['retry: 3s\n', 'retry: -1\n', 'retry: 1.5\n', 'retry:\n', 'retry: ٣\n', 'retry:  5\n']) {
    const q = new SSEParser(() => {});
    q.push(bad);
    assert.equal(q.retry, null, bad);
  }
  assert.equal(new SSEParser(() => {}).retry, null);
});

test('unknown fields are ignored', () => {
  assert.deepEqual(parse(['foo: bar\nData: x\ndata: y\nDATA\n\n']).events.map((e) => e.data), ['y']);
});

test('an incomplete event at the end of the stream is discarded', () => {
  assert.deepEqual(parse(['data: a\n\ndata: b\n']).events.map((e) => e.data), ['a']);
  assert.deepEqual(parse(['data: a\n\ndata: b']).events.map((e) => e.data), ['a']);
  // the parser is then ready for another stream (a reconnection), its last event id kept
  const events = [];
  const p = new SSEParser((e) => events.push(e));
  p.push('id: 5\ndata: a\n\ndata: lost');
  p.end();
  p.push('\uFEFFdata: b\n\n');
  assert.deepEqual(events, [{ event: 'message', data: 'a', id: '5' }, { event: 'message', data: 'b', id: '5' }]);
});

test('a large event in many pieces', () => {
  const big = 'x'.repeat(100000);
  const s = `data: ${big}\n\n`;
  const chunks = [];
  for (let i = 0; i < s.length; i += 7) chunks.push(s.slice(i, i + 7));
  assert.deepEqual(parse(chunks).events, [{ event: 'message', data: big, id: '' }]);
});

// A ReadableStream giving these byte chunks, then closing (or staying open: hang).
function byteStream(chunks, { hang = false, onCancel } = {}) {
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++]);
      else if (!hang) controller.close();
      else return new Promise(() => {}); // a server that says nothing more
    },
    cancel(reason) { if (onCancel) onCancel(reason); },
  });
}

function splitBytes(bytes, size) {
  const out = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.slice(i, i + size));
  return out;
}

test('readEventStream decodes UTF-8 split anywhere, a character at a time', async () => {
  const text = '\uFEFFdata: caf\u00e9 \u{1F600}!\r\n\r\nevent: \u00e9\ndata: \u{1F600}\n\n';
  const bytes = new TextEncoder().encode(text);
  for (const size of [1, 2, 3, 5, bytes.length]) {
    const events = [];
    const r = await readEventStream(byteStream(splitBytes(bytes, size)), (e) => events.push(e));
    assert.deepEqual(r, { aborted: false });
    assert.deepEqual(events, [
      { event: 'message', data: 'caf\u00e9 \u{1F600}!', id: '' },
      { event: '\u00e9', data: '\u{1F600}', id: '' },
    ], `chunks of ${size} bytes`);
  }
});

test('readEventStream splits at every byte of a multi-byte character', async () => {
  const bytes = new TextEncoder().encode('data: \u00e9\u{1F600}\n\n');
  for (let i = 0; i <= bytes.length; i++) {
    const events = [];
    await readEventStream(byteStream([bytes.slice(0, i), bytes.slice(i)]), (e) => events.push(e));
    assert.deepEqual(events.map((e) => e.data), ['\u00e9\u{1F600}'], `split at byte ${i}`);
  }
});

test('readEventStream strips one BOM, as the standard does', async () => {
  const bytes = new TextEncoder().encode('\uFEFF\uFEFFdata: a\n\ndata: b\n\n');
  const events = [];
  await readEventStream(byteStream([bytes]), (e) => events.push(e));
  assert.deepEqual(events.map((e) => e.data), ['b']);
});

test('readEventStream discards an incomplete event at the end', async () => {
  const events = [];
  await readEventStream(byteStream([new TextEncoder().encode('data: a\n\ndata: b')]), (e) => events.push(e));
  assert.deepEqual(events.map((e) => e.data), ['a']);
});

test('readEventStream returns { aborted: true } on abort, cancelling the body', async () => {
  const controller = new AbortController();
  let cancelled = false;
  const events = [];
  const body = byteStream([new TextEncoder().encode('data: a\n\n')], { hang: true, onCancel: () => { cancelled = true; } });
  const r = await readEventStream(body, (e) => {
    events.push(e);
    setTimeout(() => controller.abort(), 5); // while the reader waits for more
  }, { signal: controller.signal });
  assert.deepEqual(r, { aborted: true });
  assert.deepEqual(events.map((e) => e.data), ['a']);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.ok(cancelled);
});

test('readEventStream with an already aborted signal reads nothing', async () => {
  const controller = new AbortController();
  controller.abort();
  const events = [];
  const r = await readEventStream(byteStream([new TextEncoder().encode('data: a\n\n')]), (e) => events.push(e), { signal: controller.signal });
  assert.deepEqual(r, { aborted: true });
  assert.deepEqual(events, []);
});

test('readEventStream delivers no event after an abort from inside onEvent', async () => {
  const controller = new AbortController();
  const events = [];
  const bytes = new TextEncoder().encode('data: a\n\ndata: b\n\ndata: c\n\n');
  const r = await readEventStream(byteStream([bytes]), (e) => {
    events.push(e.data);
    controller.abort();
  }, { signal: controller.signal });
  assert.deepEqual(r, { aborted: true });
  assert.deepEqual(events, ['a']);
});

test('readEventStream rejects with an error thrown by onEvent, and cancels the body', async () => {
  let cancelled = false;
  const body = byteStream([new TextEncoder().encode('data: a\n\n')], { hang: true, onCancel: () => { cancelled = true; } });
  await assert.rejects(readEventStream(body, () => { throw new Error('boom'); }), /boom/);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.ok(cancelled);
});

test('readEventStream rejects when the stream errors', async () => {
  const body = new ReadableStream({ pull(c) { c.error(new Error('connection reset')); } });
  await assert.rejects(readEventStream(body, () => {}), /connection reset/);
});

test('openAIChunks parses chunks and reports [DONE]', async () => {
  const got = [];
  const onEvent = openAIChunks((chunk, info) => got.push([chunk, info]));
  const text =
    'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n' +
    ': keep-alive\n\n' +
    'data: {"choices":[{"delta":{"content":" there"},"finish_reason":"stop"}]}\n\n' +
    'data: [DONE]\n\n';
  await readEventStream(byteStream([new TextEncoder().encode(text)]), onEvent);
  assert.deepEqual(got, [
    [{ choices: [{ delta: { content: 'Hi' } }] }, { done: false, event: 'message' }],
    [{ choices: [{ delta: { content: ' there' }, finish_reason: 'stop' }] }, { done: false, event: 'message' }],
    [null, { done: true }],
  ]);
});

test('openAIChunks skips empty data', () => {
  const got = [];
  const onEvent = openAIChunks((c) => got.push(c));
  onEvent({ event: 'message', data: '', id: '' });
  onEvent({ event: 'message', data: ' \n', id: '' });
  assert.deepEqual(got, []);
});

test('openAIChunks throws on invalid JSON, quoting at most 200 characters of it', async () => {
  const onEvent = openAIChunks(() => {});
  assert.throws(() => onEvent({ event: 'message', data: '{"oops', id: '' }), (e) => {
    assert.match(e.message, /invalid JSON/);
    assert.ok(e.message.includes('{\\"oops'));
    return true;
  });
  const long = `{${'x'.repeat(1000)}`;
  assert.throws(() => onEvent({ event: 'message', data: long, id: '' }), (e) => {
    assert.match(e.message, /invalid JSON/);
    assert.ok(e.message.includes('x'.repeat(199)));
    assert.ok(!e.message.includes('x'.repeat(200)));
    return true;
  });
  // and through readEventStream, as a rejection
  const body = byteStream([new TextEncoder().encode('data: {"a":1}\n\ndata: not json\n\n')]);
  const got = [];
  await assert.rejects(readEventStream(body, openAIChunks((c) => got.push(c))), /invalid JSON: "not json"/);
  assert.deepEqual(got, [{ a: 1 }]);
});
