// The page lumen serve shows at /: a chat with each reply's latency diagnosis, and a live view
// of the engine. It talks only to this server's OpenAI endpoints and /metrics.
import { apiFetch, errorMessage, setKeyPrompt } from './api.js';
import { ChatView } from './chat.js';
import { EngineView } from './engine.js';
import { loadState } from './store.js';

const $ = (id) => document.getElementById(id);

// The key dialog: resolves to the key typed, or null when dismissed.
function askForKey(refused) {
  return new Promise((resolve) => {
    const dialog = $('key-dialog');
    $('key-error').hidden = !refused;
    $('key-input').value = '';
    const done = (value) => {
      dialog.removeEventListener('close', onClose);
      $('key-form').removeEventListener('submit', onSubmit);
      resolve(value);
    };
    const onSubmit = (e) => {
      e.preventDefault();
      const k = $('key-input').value.trim();
      if (!k) return;
      dialog.close();
      done(k);
    };
    const onClose = () => done(null);
    $('key-form').addEventListener('submit', onSubmit);
    dialog.addEventListener('close', onClose);
    dialog.showModal();
    $('key-input').focus();
  });
}

const THEMES = ['auto', 'light', 'dark'];
function applyTheme(t) {
  if (t === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
  $('theme-toggle').setAttribute('aria-label', `Theme: ${t}`);
  $('theme-toggle').title = `Theme: ${t} (click to change)`;
}

function setupTabs(engine) {
  const tabs = [$('tab-chat'), $('tab-engine')];
  const select = (tab) => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute('aria-controls')).hidden = !on;
    }
    engine.show(tab.id === 'tab-engine');
    location.hash = tab.id === 'tab-engine' ? 'engine' : '';
  };
  for (const t of tabs) {
    t.addEventListener('click', () => select(t));
    t.addEventListener('keydown', (e) => {
      if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
      const next = tabs[(tabs.indexOf(t) + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      next.focus();
      select(next);
    });
  }
  select(location.hash === '#engine' ? tabs[1] : tabs[0]);
}

async function main() {
  setKeyPrompt(askForKey);
  let theme = localStorage.getItem('lumen.theme') || 'auto';
  applyTheme(theme);
  $('theme-toggle').addEventListener('click', () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    localStorage.setItem('lumen.theme', theme);
    applyTheme(theme);
  });
  $('sidebar-toggle').addEventListener('click', () => {
    const open = $('sidebar').classList.toggle('open');
    $('sidebar-toggle').setAttribute('aria-expanded', String(open));
  });

  let model = '';
  const chat = new ChatView(loadState(), { modelName: () => model });
  const engine = new EngineView();
  setupTabs(engine);
  try {
    const res = await apiFetch('/v1/models');
    if (!res.ok) throw new Error(await errorMessage(res));
    const j = await res.json();
    model = (j.data && j.data[0] && j.data[0].id) || '';
    const ctx = j.data && j.data[0] && j.data[0].max_model_len;
    $('model-name').textContent = ctx ? `${model} · ${ctx.toLocaleString('en-US')} tokens of context` : model;
  } catch (e) {
    chat.showError(`Cannot reach the server's /v1/models: ${e.message || e}`);
  }
  engine.start();
  $('input').focus();
}

main();
