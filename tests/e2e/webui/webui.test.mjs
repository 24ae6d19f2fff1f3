// The web page `lumen serve` shows at /, in Debian's chromium (headless) driven by
// playwright-core, against a real server on stories260K. Screenshots of the chat and the engine
// tab, at desktop and phone width, go to $LUMEN_ARTIFACTS (CTest: build/artifacts/webui).
//
// Environment: as tests/e2e/server/helpers.mjs, plus LUMEN_CHROMIUM (default /usr/bin/chromium).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { REPO_ROOT, SLOW, metricValue, request, sleep, startServer, waitForIdle } from '../server/helpers.mjs';

const CHROMIUM = process.env.LUMEN_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = path.resolve(process.env.LUMEN_ARTIFACTS || path.join(REPO_ROOT, 'build/artifacts/webui'));
if (!existsSync(CHROMIUM)) throw new Error(`chromium not found at ${CHROMIUM}: run scripts/setup.sh (Debian's chromium), or set LUMEN_CHROMIUM`);
mkdirSync(ARTIFACTS, { recursive: true });

const T = 30000 * SLOW;  // a step's deadline
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

// Flags for a closed network (no Google lookups, no background connections) and root.
const LAUNCH = {
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
};

let browser;
before(async () => {
  browser = await chromium.launch(LAUNCH);
});
after(async () => {
  await browser?.close();
});

// A new page with its own storage; page errors fail the test.
async function openPage(server, viewport = DESKTOP) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/401|Unauthorized/.test(m.text())) errors.push(m.text());
  });
  await page.goto(server.base + '/');
  return { page, context, errors };
}

async function sendMessage(page, text) {
  await page.locator('#input').fill(text);
  await page.locator('#input').press('Enter');  // Enter sends
}

// The reply length setting (the server is started with a 16k context, which a chat reply
// would otherwise be allowed to fill).
async function setMaxTokens(page, n) {
  if (!(await page.locator('#set-max_tokens').isVisible())) await page.locator('#settings summary').click();
  await page.locator('#set-max_tokens').fill(String(n));
  await page.locator('#set-max_tokens').dispatchEvent('change');
}

// Waits until the last assistant reply has finished (its verdict is shown).
async function lastReplyDone(page) {
  const reply = page.locator('.msg.assistant').last();
  await reply.locator('.stats .verdict').waitFor({ timeout: T });
  return reply;
}

describe('web page', () => {
  let server;
  before(async () => {
    server = await startServer(['--chat-template', 'chatml', '-c', '16384']);
  });
  after(async () => {
    await server?.stop();
  });

  test('the page is served from the binary, with a strict content security policy and ETag', async () => {
    const r = await request(server.port, '/');
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^text\/html/);
    assert.match(r.headers['content-security-policy'], /script-src 'self'/);
    assert.match(r.text, /<script defer src="\/assets\/app.js">/);
    const js = await request(server.port, '/assets/app.js');
    assert.equal(js.status, 200);
    assert.match(js.headers['content-type'], /^text\/javascript/);
    const again = await request(server.port, '/assets/app.js', { headers: { 'If-None-Match': js.headers.etag } });
    assert.equal(again.status, 304);
    assert.equal((await request(server.port, '/assets/nope.js')).status, 404);
    assert.equal((await request(server.port, '/', { method: 'POST', body: {} })).status, 405);
  });

  test('chat: a reply streams and finishes with TTFT and tok/s; Shift+Enter is a new line; reload keeps it', async () => {
    const { page, context, errors } = await openPage(server);
    await page.locator('#input').fill('Once upon a time');
    await page.locator('#input').press('Shift+Enter');
    assert.equal(await page.locator('#input').inputValue(), 'Once upon a time\n');
    await page.locator('#input').fill('Tell me a story about a cat.');
        await setMaxTokens(page, 200);
    await sendMessage(page, 'Tell me a story about a cat.');
    const reply = await lastReplyDone(page);
    // It streamed: the text came in many pieces, each one's arrival recorded.
    const arrivals = await page.evaluate(() => {
      const s = JSON.parse(localStorage.getItem('lumen.conversations.v1'));
      const c = s.conversations.find((x) => x.id === s.current);
      return c.messages[c.messages.length - 1].arrivals.length;
    });
    assert.ok(arrivals > 10, `the reply came in ${arrivals} pieces`);
    const stats = await reply.locator('.stats').innerText();
    assert.match(stats, /TTFT \d+(\.\d+)? (ms|s)/);
    assert.match(stats, /decode \d+(\.\d+)? tok\/s/);
    assert.match(stats, /prompt \d+ tok \(\d+ cached\)/);
    assert.match(await reply.locator('.stats .verdict').innerText(), /streaming at \d+(\.\d+)? tok\/s|slow to start/);
    assert.ok((await reply.locator('.body').innerText()).trim().length > 0, 'the reply is empty');
    assert.equal(await reply.locator('svg.timeline').count(), 1, 'no token timeline');
    assert.ok(await page.locator('#send').isVisible(), 'Send did not come back');
    await page.screenshot({ path: path.join(ARTIFACTS, 'chat-desktop.png'), fullPage: true });

    // Reload: the conversation comes back from the browser's storage.
    const before = await page.locator('.msg').count();
    const text = await reply.locator('.body').innerText();
    await page.reload();
    await page.locator('.msg.assistant .stats .verdict').first().waitFor({ timeout: T });
    assert.equal(await page.locator('.msg').count(), before);
    assert.equal(await page.locator('.msg.assistant').last().locator('.body').innerText(), text);

    // Regenerate replaces the last reply; edit and resend replaces the question.
    await page.locator('.msg.assistant').last().locator('button.regenerate').click();
    await lastReplyDone(page);
    assert.equal(await page.locator('.msg').count(), before);
    await page.locator('.msg.user').first().locator('button.edit').click();
    await page.locator('.msg.user').first().locator('textarea').fill('A story about a dog, please.');
    await page.locator('.msg.user').first().locator('textarea').press('Enter');
    await lastReplyDone(page);
    assert.equal(await page.locator('.msg').count(), 2);
    assert.equal(await page.locator('.msg.user').first().innerText().then((t) => t.split('\n')[0]), 'A story about a dog, please.');

    await page.setViewportSize(PHONE);
    await page.screenshot({ path: path.join(ARTIFACTS, 'chat-phone.png'), fullPage: true });
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('a reply with <script> in it renders as text, not markup', async () => {
    const { page, context, errors } = await openPage(server);
    // The model is made to write markup by a grammar added to the page's request: a real reply
    // from the server, streamed token by token, whose text is HTML.
    const evil = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> **bold** [x](javascript:window.__pwned=3)';
    await page.route('**/v1/chat/completions', (route) => {
      const body = JSON.parse(route.request().postData());
      body.grammar = `root ::= ${JSON.stringify(evil)}`;
      route.continue({ postData: JSON.stringify(body) });
    });
    await setMaxTokens(page, 100);
    await sendMessage(page, 'Write some HTML.');
    const reply = await lastReplyDone(page);
    const body = reply.locator('.body');
    assert.match(await body.innerText(), /<script>window.__pwned = 1<\/script><img src=x onerror="window.__pwned = 2">/);
    assert.equal(await body.locator('script, img, [onerror]').count(), 0);
    assert.equal(await body.locator('strong').innerText(), 'bold');
    assert.equal(await body.locator('a').count(), 0, 'a javascript: link was made');
    await body.locator('strong').click();
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('stop (Esc) cancels a long reply on the server: 0 running requests after', async () => {
    const { page, context, errors } = await openPage(server);
    await setMaxTokens(page, 15000);
    await page.locator('#set-ignore_eos').check();
    await sendMessage(page, 'Tell me a very long story.');
    const reply = page.locator('.msg.assistant').last();
    // Some of it has streamed, and the server is computing it.
    const deadline = Date.now() + T;
    while ((await reply.locator('.body').innerText()).length < 200) {
      assert.ok(Date.now() < deadline, 'the reply did not stream');
      await sleep(20);
    }
    assert.equal(metricValue(await server.metrics(), 'lumen_num_requests_running'), 1, 'the request is not running');
    await page.keyboard.press('Escape');
    await reply.locator('.stats .verdict').waitFor({ timeout: T });
    assert.match(await reply.locator('.stats').innerText(), /finish stopped/);
    await waitForIdle(server, T);
    const generated = metricValue(await server.metrics(), 'lumen_engine_generated_tokens_total');
    assert.ok(generated < 15000, `the reply ran to the end (${generated} tokens)`);
    assert.equal(metricValue(await server.metrics(), 'lumen_request_success_total', { finished_reason: 'abort' }), 1);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('engine tab: live figures and charts from /metrics after a chat', async () => {
    const { page, context, errors } = await openPage(server);
    await setMaxTokens(page, 100);
    await sendMessage(page, 'Hello!');
    await lastReplyDone(page);
    await page.locator('#tab-engine').click();
    assert.equal(await page.locator('#view-chat').isHidden(), true);
    const deadline = Date.now() + T;
    while (!(Number((await page.locator('#m-generated').innerText()).replace(/,/g, '')) > 0)) {
      assert.ok(Date.now() < deadline, 'the engine tab never showed generated tokens');
      await sleep(100);
    }
    assert.match(await page.locator('#m-kv').innerText(), /^\d[\d,]* \/ \d[\d,]*$/);
    assert.match(await page.locator('#m-running').innerText(), /^\d+$/);
    assert.ok((await page.locator('#c-ttft svg rect.bar').count()) > 0, 'no TTFT histogram');
    assert.ok((await page.locator('#c-itl svg rect.bar').count()) > 0, 'no ITL histogram');
    assert.match(await page.locator('#c-ttft-q').innerText(), /p50/);
    await page.locator('#c-rate svg').waitFor({ timeout: T });
    await page.screenshot({ path: path.join(ARTIFACTS, 'engine-desktop.png'), fullPage: true });
    await page.setViewportSize(PHONE);
    await page.screenshot({ path: path.join(ARTIFACTS, 'engine-phone.png'), fullPage: true });
    // Dark theme, chosen with the theme button (auto -> light -> dark).
    await page.locator('#theme-toggle').click();
    await page.locator('#theme-toggle').click();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    await page.setViewportSize(DESKTOP);
    await page.screenshot({ path: path.join(ARTIFACTS, 'engine-desktop-dark.png'), fullPage: true });
    // Keyboard: the tabs move with the arrow keys.
    await page.locator('#tab-engine').focus();
    await page.keyboard.press('ArrowLeft');
    assert.equal(await page.locator('#tab-chat').getAttribute('aria-selected'), 'true');
    assert.deepEqual(errors, []);
    await context.close();
  });
});

describe('web page with --api-key', () => {
  let server;
  before(async () => {
    server = await startServer(['--chat-template', 'chatml', '--api-key', 'sesame'], { apiKey: 'sesame' });
  });
  after(async () => {
    await server?.stop();
  });

  test('the page asks for the key, refuses a wrong one, then works', async () => {
    const { page, context } = await openPage(server);
    const dialog = page.locator('#key-dialog');
    await dialog.waitFor({ state: 'visible', timeout: T });
    await page.locator('#key-input').fill('wrong');
    await page.locator('#key-input').press('Enter');
    await page.locator('#key-error').waitFor({ state: 'visible', timeout: T });
    await page.locator('#key-input').fill('sesame');
    await page.locator('#key-ok').click();
    await dialog.waitFor({ state: 'hidden', timeout: T });
    await setMaxTokens(page, 50);
    await sendMessage(page, 'Hi there');
    const reply = await lastReplyDone(page);
    assert.match(await reply.locator('.stats').innerText(), /TTFT/);
    assert.equal(await reply.locator('.error').count(), 0);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('lumen.apiKey')), 'sesame');
    await context.close();
  });
});

describe('--no-webui', () => {
  test('/ answers 404 saying the page is off; the API still works', async () => {
    const server = await startServer(['--no-webui']);
    try {
      const r = await request(server.port, '/');
      assert.equal(r.status, 404);
      assert.match(r.json.error.message, /--no-webui/);
      assert.equal((await request(server.port, '/v1/models')).status, 200);
    } finally {
      await server.stop();
    }
  });
});
