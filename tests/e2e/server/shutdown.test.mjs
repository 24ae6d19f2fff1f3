// SIGTERM / SIGINT: the server stops accepting, lets running requests finish (within
// --shutdown-timeout) and exits 0 without leaked KV blocks.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SANITIZED, SLOW, checkExit, metricValue, rawStream, request, sleep, startServer } from './helpers.mjs';

// Long enough to be running when the signal comes (~0.1 s at full speed), short enough to finish
// well within --shutdown-timeout 10 on a busy 2-core machine.
const N = SANITIZED ? 300 : 1000;

describe('shutdown', () => {
  test('SIGTERM while idle: exit 0', async () => {
    const server = await startServer();
    const t0 = Date.now();
    await server.stop();
    assert.ok(Date.now() - t0 < 5000 * SLOW, 'an idle server took long to stop');
    assert.match(server.stderr(), /SIGTERM received/);
  });

  test('SIGINT: exit 0', async () => {
    const server = await startServer();
    server.proc.kill('SIGINT');
    await server.exitPromise;
    checkExit(server);
    assert.match(server.stderr(), /SIGINT received/);
  });

  test('SIGTERM during requests: they finish, new connections are refused, exit 0', async () => {
    const server = await startServer(['--shutdown-timeout', '10']);
    const body = { prompt: 'Once upon a time', max_tokens: N, temperature: 0, ignore_eos: true };
    let sigtermAt = 0;
    let eventsAfterSigterm = 0;
    // One whole (non-streamed) and one streamed request, both running when SIGTERM comes.
    const whole = request(server.port, '/v1/completions', { method: 'POST', body });
    const streamed = rawStream(server.port, { ...body, stream: true, stream_options: { include_usage: true } }, {
      onEvent: () => {
        if (sigtermAt) eventsAfterSigterm++;
      },
    });
    const deadline = Date.now() + 10000 * SLOW;
    while (metricValue(await server.metrics(), 'lumen_num_requests_running') < 2) {
      assert.ok(Date.now() < deadline, 'the two requests never ran together');
      await sleep(1);
    }
    server.proc.kill('SIGTERM');
    sigtermAt = Date.now();
    // Once the server has seen the signal, a new connection is refused (or answered 503).
    while (!/SIGTERM received/.test(server.stderr()) && !server.exited()) await sleep(5);
    await sleep(50);
    let refused = false;
    try {
      const r = await request(server.port, '/v1/completions', { method: 'POST', body: { prompt: 'Hi', max_tokens: 1 }, timeoutMs: 5000 });
      refused = r.status === 503;
    } catch (e) {
      refused = e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET';
    }
    assert.ok(refused, 'a new request was accepted after SIGTERM');

    const r = await streamed;
    assert.equal(r.status, 200);
    assert.equal(r.events.at(-1), '[DONE]', 'the stream was cut short by the shutdown');
    assert.equal(r.events.at(-2).usage.completion_tokens, N);
    const last = r.events.filter((e) => e !== '[DONE]' && e.choices.length).at(-1);
    assert.equal(last.choices[0].finish_reason, 'length');
    assert.ok(eventsAfterSigterm > 0, 'the request was not running any more when SIGTERM came (make it longer)');
    const w = await whole;
    assert.equal(w.status, 200, w.text);
    assert.equal(w.json.usage.completion_tokens, N);
    await server.exitPromise;
    checkExit(server);
    assert.doesNotMatch(server.stderr(), /cancelling/);
  });

  test('SIGTERM just as new requests arrive: never a crash, exit 0', async () => {
    // Connections accepted (or refused) while the listening socket closes.
    for (let i = 0; i < (SANITIZED ? 3 : 10); i++) {
      const server = await startServer(['--shutdown-timeout', '10']);
      const body = { prompt: 'Once upon a time', max_tokens: 200, temperature: 0, ignore_eos: true };
      let late;
      const streamed = rawStream(server.port, { ...body, stream: true }, {
        onEvent: () => {
          if (late) return;
          late = Promise.allSettled(
            Array.from({ length: 4 }, () => request(server.port, '/v1/completions', { method: 'POST', body, timeoutMs: 20000 * SLOW })),
          );
          setTimeout(() => server.proc.kill('SIGTERM'), 2 + i);
        },
      });
      const r = await streamed;
      await late;
      await server.exitPromise;
      checkExit(server);
      assert.equal(r.events.at(-1), '[DONE]', 'the running stream was cut short');
    }
  });

  test('SIGTERM with a request longer than --shutdown-timeout: it is cancelled, exit 0', async () => {
    const server = await startServer(['--shutdown-timeout', '0.2', '--parallel', '1']);
    // Many long requests queued behind one another outlast 0.2 s.
    const body = { prompt: 'Once upon a time', max_tokens: 2 * N, temperature: 0, ignore_eos: true, stream: true };
    let started;
    const first = new Promise((r) => (started = r));
    const streams = Array.from({ length: 8 }, () => rawStream(server.port, body, { onEvent: () => started() }));
    await first;
    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    const results = await Promise.all(streams);
    await server.exitPromise;
    checkExit(server);
    assert.ok(Date.now() - t0 < 10000 * SLOW, 'the shutdown did not respect --shutdown-timeout');
    const complete = results.filter((r) => r.events.at(-1) === '[DONE]').length;
    assert.ok(complete < 8, 'every request finished: the test did not exercise the timeout');
  });
});
