// The chat view: conversations, streaming replies with their latency figures, stop,
// regenerate, edit and resend, copy, settings.
import { apiFetch, errorMessage } from './api.js';
import { timeline } from './charts.js';
import { renderMarkdown } from './markdown.js';
import { openAIChunks, readEventStream } from './sse.js';
import { exportJson, newConversation, saveState, titleOf } from './store.js';
import { formatCount, formatMs, formatRate, replyStats } from './verdict.js';

const $ = (id) => document.getElementById(id);
const SETTINGS = ['temperature', 'top_p', 'top_k', 'max_tokens', 'seed'];
const MAX_ARRIVALS = 4000;  // kept per reply (localStorage is small): later ones are thinned

export class ChatView {
  constructor(state, { modelName }) {
    this.state = state;
    this.modelName = modelName;
    this.running = null;  // { controller, message } while a reply streams
    this.bind();
    this.loadSettings();
    this.renderSidebar();
    this.renderMessages();
  }

  get conv() {
    return this.state.conversations.find((c) => c.id === this.state.current) || this.state.conversations[0];
  }

  save() {
    if (!saveState(this.state)) this.showError('The browser refused to store the conversation (storage full or disabled).');
  }

  bind() {
    $('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      this.send();
    });
    $('input').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      }
    });
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.running) {
        e.preventDefault();
        this.stop();
      }
    });
    $('stop').addEventListener('click', () => this.stop());
    $('new-chat').addEventListener('click', () => {
      if (this.running) this.stop();
      const c = newConversation();
      c.system = this.conv.system;  // a new chat keeps the system prompt in use
      this.state.conversations.unshift(c);
      this.state.current = c.id;
      this.save();
      this.renderSidebar();
      this.renderMessages();
      $('input').focus();
    });
    $('delete-chat').addEventListener('click', () => {
      if (this.running) this.stop();
      const i = this.state.conversations.indexOf(this.conv);
      this.state.conversations.splice(i, 1);
      if (!this.state.conversations.length) this.state.conversations.push(newConversation());
      this.state.current = this.state.conversations[Math.max(0, i - 1)].id;
      this.save();
      this.renderSidebar();
      this.renderMessages();
    });
    $('export').addEventListener('click', () => {
      const blob = new Blob([exportJson(this.state)], { type: 'application/json' });
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = `lumen-conversations-${new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-')}.json`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    });
    $('system-prompt').addEventListener('change', () => {
      this.conv.system = $('system-prompt').value;
      this.save();
    });
    for (const k of [...SETTINGS, 'stop', 'ignore_eos']) $(`set-${k}`).addEventListener('change', () => this.storeSettings());
  }

  loadSettings() {
    const s = this.state.settings || {};
    for (const k of SETTINGS) $(`set-${k}`).value = s[k] ?? '';
    $('set-stop').value = (s.stop || []).join('\n');
    $('set-ignore_eos').checked = !!s.ignore_eos;
  }

  storeSettings() {
    const s = {};
    for (const k of SETTINGS) {
      const v = $(`set-${k}`).value.trim();
      if (v !== '' && Number.isFinite(Number(v))) s[k] = Number(v);
    }
    const stop = $('set-stop').value.split('\n').filter((x) => x !== '');
    if (stop.length) s.stop = stop;
    if ($('set-ignore_eos').checked) s.ignore_eos = true;
    this.state.settings = s;
    this.save();
  }

  renderSidebar() {
    const ul = $('conversations');
    ul.replaceChildren();
    for (const c of this.state.conversations) {
      const li = document.createElement('li');
      const b = document.createElement('button');
      b.textContent = c.title;
      b.title = c.title;
      if (c.id === this.state.current) b.setAttribute('aria-current', 'true');
      b.addEventListener('click', () => {
        if (this.running) this.stop();
        this.state.current = c.id;
        this.save();
        this.renderSidebar();
        this.renderMessages();
        document.getElementById('sidebar').classList.remove('open');
      });
      li.append(b);
      ul.append(li);
    }
    $('system-prompt').value = this.conv.system || '';
  }

  renderMessages() {
    const box = $('messages');
    box.replaceChildren(...this.conv.messages.map((m, i) => this.messageElement(m, i)));
    box.scrollTop = box.scrollHeight;
  }

  messageElement(m, index) {
    const div = document.createElement('div');
    div.className = `msg ${m.role}`;
    div.dataset.index = String(index);
    const body = document.createElement('div');
    body.className = 'body';
    this.fillBody(body, m);
    div.append(body);
    if (m.role === 'assistant') {
      const stats = document.createElement('div');
      stats.className = 'stats';
      div.append(stats);
      this.fillStats(stats, m);
    }
    div.append(this.actions(m, index));
    return div;
  }

  fillBody(body, m) {
    if (m.role === 'user') body.textContent = m.content;
    // Safe by construction: renderMarkdown escapes every character of the model's text and
    // writes only its own tags (markdown.js; tested in webui/test/markdown.test.js).
    else body.innerHTML = renderMarkdown(m.content) || (m.pending ? '<p class="muted">…</p>' : '');
    if (m.error) {
      const p = document.createElement('p');
      p.className = 'error';
      p.textContent = m.error;
      body.append(p);
    }
  }

  fillStats(el, m) {
    el.replaceChildren();
    const s = m.stats;
    if (!s) return;
    const fig = document.createElement('div');
    fig.className = 'figures';
    const add = (label, value) => {
      const span = document.createElement('span');
      span.textContent = `${label} ${value}`;
      fig.append(span);
    };
    if (s.prompt_tokens !== undefined) add('prompt', `${formatCount(s.prompt_tokens)} tok (${formatCount(s.cached_prompt_tokens ?? 0)} cached)`);
    add('TTFT', formatMs(s.ttft_ms));
    add('decode', `${formatRate(s.decode_per_second)} tok/s`);
    add('ITL p50', formatMs(s.itl_ms_p50));
    add('p99', formatMs(s.itl_ms_p99));
    add('tokens', formatCount(s.generated_tokens));
    if (s.finish_reason) add('finish', s.finish_reason);
    const v = document.createElement('div');
    v.className = `verdict${s.slow ? ' slow' : ''}`;
    v.textContent = s.verdict;
    el.append(v, fig);
    if (m.arrivals && m.arrivals.length) el.append(timeline(m.arrivals, { ttftMs: s.ttft_ms }));
  }

  actions(m, index) {
    const bar = document.createElement('div');
    bar.className = 'actions';
    const button = (label, fn, cls) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = label;
      if (cls) b.className = cls;
      b.addEventListener('click', fn);
      bar.append(b);
    };
    button('Copy', () => copyText(m.content), 'copy');
    if (m.role === 'user') button('Edit', () => this.edit(index), 'edit');
    if (m.role === 'assistant' && index === this.conv.messages.length - 1) button('Regenerate', () => this.regenerate(), 'regenerate');
    return bar;
  }

  edit(index) {
    if (this.running) this.stop();
    const div = $('messages').querySelector(`.msg[data-index="${index}"]`);
    const m = this.conv.messages[index];
    const box = document.createElement('div');
    box.className = 'edit-box';
    const ta = document.createElement('textarea');
    ta.value = m.content;
    ta.rows = 3;
    ta.setAttribute('aria-label', 'Edit message');
    const row = document.createElement('div');
    row.className = 'actions';
    const ok = document.createElement('button');
    ok.textContent = 'Save and resend';
    ok.className = 'primary';
    const cancel = document.createElement('button');
    cancel.textContent = 'Cancel';
    row.append(ok, cancel);
    box.append(ta, row);
    div.replaceChildren(box);
    ta.focus();
    const resend = () => {
      if (!ta.value.trim()) return;
      this.conv.messages.splice(index);  // the edited message and everything after it
      this.conv.messages.push({ role: 'user', content: ta.value });
      this.reply();
    };
    ok.addEventListener('click', resend);
    cancel.addEventListener('click', () => this.renderMessages());
    ta.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        resend();
      } else if (e.key === 'Escape') {
        e.stopPropagation();
        this.renderMessages();
      }
    });
  }

  regenerate() {
    if (this.running) return;
    const msgs = this.conv.messages;
    if (msgs.length && msgs[msgs.length - 1].role === 'assistant') msgs.pop();
    this.reply();
  }

  send() {
    const text = $('input').value;
    if (!text.trim() || this.running) return;
    $('input').value = '';
    this.conv.messages.push({ role: 'user', content: text });
    this.reply();
  }

  stop() {
    if (this.running) this.running.controller.abort();
  }

  showError(text) {
    const p = $('chat-error');
    p.textContent = text;
    p.hidden = !text;
  }

  requestBody() {
    const conv = this.conv;
    const messages = [];
    if (conv.system && conv.system.trim()) messages.push({ role: 'system', content: conv.system });
    for (const m of conv.messages) if (!m.pending) messages.push({ role: m.role, content: m.content });
    return {
      model: this.modelName(),
      messages,
      stream: true,
      stream_options: { include_usage: true },
      ...(this.state.settings || {}),
    };
  }

  async reply() {
    this.showError('');
    const conv = this.conv;
    conv.title = titleOf(conv);
    const body = this.requestBody();
    const m = { role: 'assistant', content: '', pending: true, arrivals: [] };
    conv.messages.push(m);
    this.save();
    this.renderSidebar();
    this.renderMessages();
    const controller = new AbortController();
    this.running = { controller, message: m };
    $('send').hidden = true;
    $('stop').hidden = false;
    const el = $('messages').lastElementChild;
    let serverTimings = null, usage = null, finish = null, frame = 0;
    const t0 = performance.now();
    const redraw = () => {
      frame = 0;
      this.fillBody(el.querySelector('.body'), m);
      const box = $('messages');
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
    };
    let aborted = false;
    try {
      const res = await apiFetch('/v1/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!res.ok) throw new Error(await errorMessage(res));
      const r = await readEventStream(
        res.body,
        openAIChunks((chunk) => {
          if (!chunk) return;
          if (chunk.error) throw new Error(chunk.error.message || 'the server reported an error');
          const choice = chunk.choices && chunk.choices[0];
          const delta = choice && choice.delta && choice.delta.content;
          if (delta) {
            m.content += delta;
            if (m.arrivals.length < MAX_ARRIVALS) m.arrivals.push(performance.now() - t0);
            if (!frame) frame = requestAnimationFrame(redraw);
          }
          if (choice && choice.finish_reason) finish = choice.finish_reason;
          if (chunk.timings) serverTimings = chunk.timings;
          if (chunk.usage) usage = chunk.usage;
        }),
        { signal: controller.signal },
      );
      aborted = r.aborted;
    } catch (e) {
      if (e.name === 'AbortError') aborted = true;
      else m.error = String(e.message || e);
      controller.abort();  // a broken stream: close the connection, so the server cancels it
    }
    if (frame) cancelAnimationFrame(frame);
    delete m.pending;
    m.stats = replyStats(aborted ? null : serverTimings, m.arrivals, { aborted, usage });
    m.stats.finish_reason = aborted ? 'stopped' : finish || (m.error ? 'error' : undefined);
    this.running = null;
    $('send').hidden = false;
    $('stop').hidden = true;
    this.save();
    this.renderMessages();
    $('input').focus();
  }
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API (a plain-http page on another host): the old way.
    const ta = document.createElement('textarea');
    ta.value = text;
    document.body.append(ta);
    ta.select();
    document.execCommand('copy');
    ta.remove();
  }
}
