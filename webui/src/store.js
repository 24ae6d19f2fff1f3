// Conversations, kept in the browser's localStorage (one JSON document), so a reload keeps them.
const KEY = 'lumen.conversations.v1';

export function newConversation() {
  return {
    id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
    title: 'New chat',
    created: new Date().toISOString(),
    system: '',
    messages: [],  // { role: 'user' | 'assistant', content, stats? }
  };
}

export function loadState() {
  try {
    const s = JSON.parse(localStorage.getItem(KEY) || 'null');
    if (s && Array.isArray(s.conversations) && s.conversations.length) return s;
  } catch {
    // unreadable: start afresh (the old value stays until the next save overwrites it)
  }
  const c = newConversation();
  return { conversations: [c], current: c.id, settings: {} };
}

export function saveState(state) {
  try {
    localStorage.setItem(KEY, JSON.stringify(state));
    return true;
  } catch {
    return false;  // full or disabled: the page goes on, unsaved
  }
}

// A title from the first user message.
export function titleOf(conv) {
  const first = conv.messages.find((m) => m.role === 'user');
  if (!first) return 'New chat';
  const t = first.content.replace(/\s+/g, ' ').trim();
  return t.length > 40 ? `${t.slice(0, 40)}…` : t || 'New chat';
}

// What "Export JSON" downloads: every conversation, with each reply's measured latency.
export function exportJson(state) {
  return JSON.stringify({ exported: new Date().toISOString(), conversations: state.conversations }, null, 2);
}
