// Talks to lumen's own endpoints only. The API key, when the server wants one, is asked for once
// (on the first 401) and kept in this tab's session storage.
const KEY = 'lumen.apiKey';

let asking = null;  // one dialog at a time, however many requests got 401 together
let askForKey = async () => null;  // set by the UI: resolves to a key, or null when none is given

export function setKeyPrompt(fn) {
  askForKey = fn;
}

export function apiKey() {
  try {
    return sessionStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

function headers(extra) {
  const h = { ...extra };
  const k = apiKey();
  if (k) h.Authorization = `Bearer ${k}`;
  return h;
}

// fetch() with the key; on 401 asks for a (new) key and tries again, until one works.
export async function apiFetch(path, opts = {}) {
  for (;;) {
    const res = await fetch(path, { ...opts, headers: headers(opts.headers) });
    if (res.status !== 401) return res;
    const refused = apiKey() !== '';
    if (!asking) asking = askForKey(refused).finally(() => (asking = null));
    const key = await asking;
    if (!key) return res;
    try {
      sessionStorage.setItem(KEY, key);
    } catch {
      // storage disabled: the key is still used for this request only
      return fetch(path, { ...opts, headers: { ...opts.headers, Authorization: `Bearer ${key}` } });
    }
  }
}

// The error message of a failed API response (the OpenAI error shape), or its status.
export async function errorMessage(res) {
  try {
    const j = await res.json();
    if (j && j.error && j.error.message) return `${res.status}: ${j.error.message}`;
  } catch {
    // not JSON
  }
  return `HTTP ${res.status}`;
}
