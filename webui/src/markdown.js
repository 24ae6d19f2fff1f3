// A small markdown renderer for the model's replies, safe by construction: every character of
// the source reaches the output through escapeHtml, and the only markup is the renderer's own
// tags (p br strong em del code pre h1-h6 ul ol li blockquote hr a table thead tbody tr th td)
// with the only attributes class="language-X" on code and href/target/rel on a. There is no raw
// HTML and no entity decoding: '&#106;avascript:' is text, shown as typed.
//
// It follows CommonMark and GFM where that is cheap: fenced code (an unclosed fence runs to the
// end, as a reply being streamed has), ATX headings, lists (nested by indentation), blockquotes,
// thematic breaks, pipe tables, paragraphs (a newline inside one is a <br>), and inline code,
// emphasis (CommonMark's delimiter algorithm), ~~strike~~, links, bare http(s) autolinks and
// backslash escapes. Not supported: indented code, setext headings, reference links, raw HTML,
// images (![alt](src) becomes a link to src). Time is linear in the input: no regex here can
// backtrack over more than a bounded span, and nesting is capped.

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ESC[c]);
}

// The href for a link, or null: only absolute http(s) and mailto URLs, and nothing with a
// control character or whitespace inside (browsers drop tabs and newlines from URLs, which is
// how 'java\tscript:' becomes javascript:). Relative URLs are refused too: the page's own
// origin holds the API and its key.
export function safeUrl(url) {
  if (typeof url !== 'string') return null;
  const u = url.trim();
  // \s covers Unicode spaces; \u0000-\u001f\u007f-\u009f the C0 and C1 controls.
  if (/[\s\u0000-\u001f\u007f-\u009f]/.test(u)) return null;
  if (/^https?:\/\/[^/]/i.test(u) || /^mailto:./i.test(u)) return u;
  return null;
}

const MAX_DEPTH = 12;     // nested blockquotes and lists deeper than this are plain text
const MAX_LINK = 2048;    // a link's "(destination "title")" longer than this is not a link
const MAX_PAD_COLS = 32;  // short table rows are padded with empty cells up to this many columns
const MAX_COLS = 128;     // a "table" with more columns than this is a paragraph

export function renderMarkdown(src) {
  const text = String(src == null ? '' : src).replace(/\r\n?/g, '\n').replace(/\0/g, '\uFFFD');
  try {
    return blocks(text.split('\n'), 0, false);
  } catch {
    // Not expected; but a reply must always show, and escaped text is always safe.
    return text ? `<p>${escapeHtml(text).replace(/\n/g, '<br>')}</p>` : '';
  }
}

// ---- block structure ----

function indentOf(line) {
  let col = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === 32) col++;
    else if (c === 9) col += 4 - (col % 4);
    else break;
  }
  return col;
}

// line without up to n columns of leading whitespace (a tab that straddles n leaves spaces)
function stripCols(line, n) {
  let col = 0, i = 0;
  while (i < line.length && col < n) {
    const c = line.charCodeAt(i);
    if (c === 32) { col++; i++; }
    else if (c === 9) {
      const w = 4 - (col % 4);
      if (col + w > n) return ' '.repeat(col + w - n) + line.slice(i + 1);
      col += w; i++;
    } else break;
  }
  return line.slice(i);
}

const lstrip = (s) => s.replace(/^[ \t]+/, '');
const rstrip = (s) => { let j = s.length; while (j > 0 && (s[j - 1] === ' ' || s[j - 1] === '\t')) j--; return s.slice(0, j); };
const isBlank = (s) => /^[ \t]*$/.test(s);

// ``` or ~~~ (3 or more) and an info string; a backtick fence's info may not hold a backtick.
function fenceOpen(t) {
  const ch = t[0];
  if (ch !== '`' && ch !== '~') return null;
  let n = 0;
  while (t[n] === ch) n++;
  if (n < 3) return null;
  const info = t.slice(n).trim();
  if (ch === '`' && info.includes('`')) return null;
  return { ch, n, info };
}

function fenceCloses(t, f) {
  let n = 0;
  while (t[n] === f.ch) n++;
  return n >= f.n && isBlank(t.slice(n));
}

function heading(t) {
  let n = 0;
  while (n < 7 && t[n] === '#') n++;
  if (n === 0 || n > 6 || (n < t.length && t[n] !== ' ' && t[n] !== '\t')) return null;
  let s = rstrip(t.slice(n));
  // an optional closing run of #s, when space separates it from the text (or it is all there is)
  let j = s.length;
  while (j > 0 && s[j - 1] === '#') j--;
  if (j < s.length && (j === 0 || s[j - 1] === ' ' || s[j - 1] === '\t')) s = s.slice(0, j);
  return { level: n, text: s.trim() };
}

function isThematicBreak(t) {
  const ch = t[0];
  if (ch !== '-' && ch !== '*' && ch !== '_') return false;
  let count = 0;
  for (let i = 0; i < t.length; i++) {
    if (t[i] === ch) count++;
    else if (t[i] !== ' ' && t[i] !== '\t') return false;
  }
  return count >= 3;
}

// A list item's marker: - * + or 1. 1) followed by whitespace or the end of the line.
function listMarker(line) {
  const indent = indentOf(line);
  const t = lstrip(line);
  let k = 0, ordered = false, delim, start = 0;
  if (t[0] === '-' || t[0] === '*' || t[0] === '+') { delim = t[0]; k = 1; }
  else {
    while (k < 10 && t.charCodeAt(k) >= 48 && t.charCodeAt(k) <= 57) k++;
    if (k === 0 || k > 9 || (t[k] !== '.' && t[k] !== ')')) return null;
    ordered = true; delim = t[k];
    start = parseInt(t.slice(0, k), 10);
    k++;
  }
  if (k < t.length && t[k] !== ' ' && t[k] !== '\t') return null;
  const rest = t.slice(k);
  const body = lstrip(rest);
  const markerEnd = indent + k;
  const gap = indentOf(rest);
  // content starts after 1-4 spaces; with 5 or more (or none), one space belongs to the marker
  const contentIndent = body === '' || gap > 4 ? markerEnd + 1 : markerEnd + gap;
  return { indent, ordered, delim, start, contentIndent, body: gap > 4 ? stripCols(rest, 1) : body };
}

function sameList(a, b) {
  return a.ordered === b.ordered && a.delim === b.delim;
}

function splitRow(line) {
  let s = line.trim();
  if (s[0] === '|') s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && s[i + 1] === '|') { cur += '|'; i++; } // GFM: \| is a pipe in a cell, code spans included
    else if (c === '|') { cells.push(cur.trim()); cur = ''; }
    else cur += c;
  }
  cells.push(cur.trim());
  return cells;
}

// A header row with a pipe, then a delimiter row (---, :--, --:, :-:) of as many cells.
function tableHeader(lines, i) {
  const head = lines[i], delim = lines[i + 1];
  if (delim === undefined || !head.includes('|') || !/^[ \t|:-]+$/.test(delim) || !delim.includes('-')) return null;
  const dcells = splitRow(delim);
  if (!dcells.every((c) => /^:?-+:?$/.test(c))) return null;
  const hcells = splitRow(head);
  if (hcells.length !== dcells.length || hcells.length > MAX_COLS) return null;
  return hcells;
}

// Whether line i starts a block that ends a paragraph before it.
function interrupts(lines, i, depth) {
  const line = lines[i];
  const t = lstrip(line);
  if (fenceOpen(t) || heading(t) || isThematicBreak(t)) return true;
  if (depth < MAX_DEPTH) {
    if (t[0] === '>') return true;
    const m = listMarker(line);
    // as in CommonMark: an empty item, or an ordered one not starting at 1, does not
    if (m && m.body !== '' && (!m.ordered || m.start === 1)) return true;
  }
  return tableHeader(lines, i) !== null;
}

// Renders lines as blocks. tight: inside an item of a tight list, paragraphs have no <p>.
function blocks(lines, depth, tight) {
  let out = '';
  const n = lines.length;
  let i = 0;
  while (i < n) {
    const line = lines[i];
    if (isBlank(line)) { i++; continue; }
    const t = lstrip(line);

    const f = fenceOpen(t);
    if (f) {
      const indent = indentOf(line);
      const code = [];
      i++;
      while (i < n && !fenceCloses(lstrip(lines[i]), f)) code.push(stripCols(lines[i++], indent));
      i++; // the closing fence (or past the end: an unclosed fence runs to the end)
      const lang = f.info.split(/[ \t]/)[0];
      const cls = /^[A-Za-z0-9_+-]{1,32}$/.test(lang) ? ` class="language-${lang}"` : '';
      out += `<pre><code${cls}>${escapeHtml(code.join('\n'))}</code></pre>`;
      continue;
    }

    const h = heading(t);
    if (h) {
      out += `<h${h.level}>${inline(h.text)}</h${h.level}>`;
      i++;
      continue;
    }

    if (isThematicBreak(t)) { out += '<hr>'; i++; continue; }

    if (depth < MAX_DEPTH && t[0] === '>') {
      const inner = [];
      while (i < n) {
        const q = lstrip(lines[i]);
        if (q[0] !== '>') break;
        inner.push(stripCols(q.slice(1), 1));
        i++;
      }
      out += `<blockquote>${blocks(inner, depth + 1, false)}</blockquote>`;
      continue;
    }

    const m = depth < MAX_DEPTH ? listMarker(line) : null;
    if (m) {
      const r = list(lines, i, m, depth);
      out += r.html;
      i = r.next;
      continue;
    }

    const cols = tableHeader(lines, i);
    if (cols) {
      const r = table(lines, i, cols);
      out += r.html;
      i = r.next;
      continue;
    }

    const para = [rstrip(t)];
    i++;
    while (i < n && !isBlank(lines[i]) && !interrupts(lines, i, depth)) para.push(rstrip(lstrip(lines[i++])));
    const html = inline(para.join('\n'));
    out += tight ? html : `<p>${html}</p>`;
  }
  return out;
}

// A list starting at lines[start] (marker m): its items' lines, without their indentation,
// are rendered as blocks. A line indented at least to the item's content (or 2 columns past
// its marker, the nesting people type) belongs to the item; so does a lazy continuation of its
// paragraph. A blank line between items, or inside one before more of it, makes it loose.
function list(lines, start, m, depth) {
  const n = lines.length;
  const first = m;
  const items = [];
  let loose = false;
  let i = start;
  for (;;) {
    const body = [m.body];
    const within = Math.min(m.contentIndent, m.indent + 2);
    let fence = m.body ? fenceOpen(m.body) : null; // blank lines inside a fence don't loosen
    let blanks = 0, content = m.body !== '';
    i++;
    while (i < n) {
      const line = lines[i];
      if (isBlank(line)) { blanks++; i++; continue; }
      const ind = indentOf(line);
      let add;
      if (ind >= within) add = stripCols(line, Math.min(ind, m.contentIndent));
      else if (blanks === 0 && !fence && body[body.length - 1] !== '' && !startsBlock(line)) add = lstrip(line);
      else break;
      if (blanks) {
        if (!fence && content) loose = true;
        for (; blanks > 0; blanks--) body.push('');
      }
      body.push(add);
      content = true;
      const a = lstrip(add);
      if (fence) { if (fenceCloses(a, fence)) fence = null; }
      else fence = fenceOpen(a);
      i++;
    }
    items.push(body);
    const next = i < n ? listMarker(lines[i]) : null;
    if (next && sameList(next, first) && next.indent < within) {
      if (blanks) loose = true;
      m = next;
      continue;
    }
    // trailing blank lines are left for the caller (they end nothing else)
    i -= blanks;
    break;
  }
  const tag = first.ordered ? 'ol' : 'ul';
  let html = `<${tag}>`;
  for (const body of items) html += `<li>${blocks(body, depth + 1, !loose)}</li>`;
  return { html: `${html}</${tag}>`, next: i };
}

// Any block start, for lazy continuation lines of a list item.
function startsBlock(line) {
  const t = lstrip(line);
  return !!(fenceOpen(t) || heading(t) || isThematicBreak(t) || t[0] === '>' || listMarker(line));
}

function table(lines, i, head) {
  const cols = head.length;
  const cells = (row, tag) => {
    let r = '';
    for (let c = 0; c < cols; c++) {
      if (c >= row.length && cols > MAX_PAD_COLS) break; // no padding for huge tables: output stays linear
      r += `<${tag}>${c < row.length ? inline(row[c]) : ''}</${tag}>`;
    }
    return `<tr>${r}</tr>`;
  };
  let html = `<table><thead>${cells(head, 'th')}</thead>`;
  const n = lines.length;
  i += 2;
  let body = '';
  while (i < n && !isBlank(lines[i]) && !startsBlock(lines[i])) body += cells(splitRow(lines[i++]), 'td');
  if (body) html += `<tbody>${body}</tbody>`;
  return { html: `${html}</table>`, next: i };
}

// ---- inline ----

const ASCII_PUNCT = /[!-\/:-@\[-`{-~]/;
const PUNCT = /[\p{P}\p{S}]/u;
const SPACE = /\s/;

// What flanking rules see in a character: 0 other, 1 whitespace (or the start or end of the
// text), 2 punctuation (Unicode P and S). ASCII without a regex: this runs for every delimiter.
const OTHER = 0, WS = 1, PU = 2;
function kindOf(ch) {
  if (ch === '') return WS;
  const c = ch.charCodeAt(0);
  if (c < 128) return c === 32 || (c >= 9 && c <= 13) ? WS : ASCII_PUNCT.test(ch) ? PU : OTHER;
  return SPACE.test(ch) ? WS : PUNCT.test(ch) ? PU : OTHER;
}
function charBefore(s, i) {
  if (i <= 0) return '';
  const c = s.charCodeAt(i - 1);
  if (c >= 0xdc00 && c <= 0xdfff && i >= 2) return s.slice(i - 2, i);
  return s[i - 1];
}
function charAfter(s, i) {
  if (i >= s.length) return '';
  const c = s.charCodeAt(i);
  return c >= 0xd800 && c <= 0xdbff ? s.slice(i, i + 2) : s[i];
}

// Where a run of backticks of each length starts: a code span's closer is the first later run
// of the same length. Found by a pointer per length, so that many unclosed openers stay linear.
function backtickRuns(s) {
  const runs = new Map();
  for (let i = s.indexOf('`'); i >= 0; ) {
    let j = i;
    while (s[j] === '`') j++;
    const len = j - i;
    let r = runs.get(len);
    if (!r) runs.set(len, (r = { at: [], k: 0 }));
    r.at.push(i);
    i = s.indexOf('`', j);
  }
  return runs;
}

function closingRun(runs, len, from) {
  const r = runs.get(len);
  if (!r) return -1;
  while (r.k < r.at.length && r.at[r.k] < from) r.k++;
  return r.k < r.at.length ? r.at[r.k] : -1;
}

// "(destination "title")" after a link's ']' at s[j]: { url, end } or null.
function linkTail(s, j) {
  if (s[j] !== '(') return null;
  const limit = Math.min(s.length, j + MAX_LINK);
  let k = j + 1;
  const skipSpace = () => { while (k < limit && (s[k] === ' ' || s[k] === '\t' || s[k] === '\n')) k++; };
  skipSpace();
  let url = '';
  if (s[k] === '<') {
    k++;
    while (k < limit && s[k] !== '>') {
      if (s[k] === '\n' || s[k] === '<') return null;
      if (s[k] === '\\' && ASCII_PUNCT.test(s[k + 1] || '')) k++;
      url += s[k++];
    }
    if (s[k] !== '>') return null;
    k++;
  } else {
    let depth = 0;
    while (k < limit) {
      const c = s[k];
      if (c === '\\' && ASCII_PUNCT.test(s[k + 1] || '')) { url += s[k + 1]; k += 2; continue; }
      if (c.charCodeAt(0) <= 32 || c === '\x7f') break;
      if (c === '(') { if (++depth > 32) return null; }
      else if (c === ')') { if (depth === 0) break; depth--; }
      url += c;
      k++;
    }
    if (depth !== 0) return null;
  }
  const beforeTitle = k;
  skipSpace();
  const open = s[k];
  if (k > beforeTitle && (open === '"' || open === "'" || open === '(')) {
    const close = open === '(' ? ')' : open;
    k++;
    while (k < limit && s[k] !== close) {
      if (s[k] === '\\') k++;
      else if (open === '(' && s[k] === '(') return null;
      k++;
    }
    if (s[k] !== close) return null;
    k++; // the title is dropped: no title attribute is written
    skipSpace();
  }
  if (k >= limit || s[k] !== ')') return null;
  return { url, end: k + 1 };
}

// A bare http:// or https:// URL at s[i] (GFM's extended autolink, roughly): its end, or -1.
function bareUrlEnd(s, i, inBracket) {
  const m = /https?:\/\/[A-Za-z0-9\u00a0-\uffff]/iy;
  m.lastIndex = i;
  if (!m.test(s)) return -1;
  const prev = charBefore(s, i);
  if (kindOf(prev) !== WS && !'*_~(["\'>'.includes(prev)) return -1;
  // From here on it is a link (so no text is scanned twice): it ends at whitespace, a control
  // character (safeUrl refuses those), < > " `, or, inside a link's text, a bracket.
  let j = i, open = 0, close = 0;
  for (; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c <= 32 || (c >= 0x7f && c <= 0x9f) || c === 60 || c === 62 || c === 34 || c === 96 || (c > 127 && SPACE.test(s[j]))) break;
    if (inBracket && (c === 91 || c === 93)) break;
    if (c === 40) open++;
    else if (c === 41) close++;
  }
  // trailing punctuation is the sentence's, and a ')' only belongs if it closes a '(' inside
  for (;;) {
    const c = s[j - 1];
    if ('?!.,:;*_~\''.includes(c)) j--;
    else if (c === ')' && close > open) { j--; close--; }
    else break;
  }
  return j;
}

const LINK_ATTRS = 'target="_blank" rel="noopener noreferrer nofollow"';
const openA = (href) => `<a href="${escapeHtml(href)}" ${LINK_ATTRS}>`;

// Inline markup of one paragraph (or heading, or cell). The output is a list of pieces: HTML
// strings made here from escaped text, and objects for what is decided later: delimiter runs
// (* _ ~~) that may turn into tags, and links an enclosing link may demote to text.
function inline(s) {
  const pieces = [];
  let text = '';
  const flush = () => { if (text) { pieces.push(escapeHtml(text)); text = ''; } };
  const delims = { head: null, tail: null };
  let pos = 0; // a delimiter's order in the text, for processEmphasis's lower bounds
  const brackets = [];
  const links = []; // formed links and autolinks, by piece index, for demotion
  const runs = backtickRuns(s);
  const special = /[\\`*_~!\[\]<\nhH]/g;
  const n = s.length;
  let i = 0;
  while (i < n) {
    special.lastIndex = i;
    const m = special.exec(s);
    if (!m) { text += s.slice(i); break; }
    if (m.index > i) text += s.slice(i, m.index);
    i = m.index;
    const c = s[i];
    if (c === '\\') {
      const d = s[i + 1];
      if (d === '\n') { flush(); pieces.push('<br>'); i += 2; }
      else if (d !== undefined && ASCII_PUNCT.test(d)) { text += d; i += 2; }
      else { text += c; i++; }
    } else if (c === '\n') {
      flush(); pieces.push('<br>'); i++;
    } else if (c === '`') {
      let j = i;
      while (s[j] === '`') j++;
      const len = j - i;
      const close = closingRun(runs, len, j);
      if (close < 0) { text += s.slice(i, j); i = j; continue; }
      let code = s.slice(j, close).replace(/\n/g, ' ');
      if (code.length > 1 && code[0] === ' ' && code[code.length - 1] === ' ' && code.trim() !== '') code = code.slice(1, -1);
      flush();
      pieces.push(`<code>${escapeHtml(code)}</code>`);
      i = close + len;
    } else if (c === '*' || c === '_' || c === '~') {
      let j = i;
      while (s[j] === c) j++;
      const len = j - i;
      const kB = kindOf(charBefore(s, i)), kA = kindOf(charAfter(s, j));
      const wsB = kB === WS, wsA = kA === WS, pB = kB === PU, pA = kA === PU;
      const left = !wsA && (!pA || wsB || pB);
      const right = !wsB && (!pB || wsA || pA);
      let canOpen = left, canClose = right;
      if (c === '_') { canOpen = left && (!right || pB); canClose = right && (!left || pA); }
      if ((c === '~' && len !== 2) || (!canOpen && !canClose)) { text += s.slice(i, j); i = j; continue; }
      flush();
      const d = { ch: c, count: len, orig: len, canOpen, canClose, opens: '', closes: '', prev: delims.tail, next: null, pos: pos++ };
      if (delims.tail) delims.tail.next = d; else delims.head = d;
      delims.tail = d;
      pieces.push(d);
      i = j;
    } else if (c === '[' || (c === '!' && s[i + 1] === '[')) {
      flush();
      const image = c === '!';
      brackets.push({ image, at: pieces.length, bottom: delims.tail, active: true });
      pieces.push(image ? '![' : '[');
      i += image ? 2 : 1;
    } else if (c === ']') {
      const b = brackets.pop();
      const tail = b && b.active ? linkTail(s, i + 1) : null;
      if (!tail) { text += ']'; i++; continue; }
      flush();
      processEmphasis(delims, b.bottom);
      // no links inside links: the ones inside this one's text become text
      while (links.length && links[links.length - 1].at > b.at) links.pop().demoted = true;
      const href = safeUrl(tail.url);
      if (href) {
        const a = { kind: 'a', href, at: b.at, demoted: false };
        pieces[b.at] = a;
        pieces.push({ kind: '/a', a });
        links.push(a);
      } else {
        pieces[b.at] = ''; // an unsafe or relative URL: the text alone
      }
      if (!b.image) {
        // CommonMark: the '[' before a link can no longer open one (images can). Stops at the
        // first one already inactive: every '[' below it is too, so this stays linear.
        for (let k = brackets.length - 1; k >= 0; k--) {
          if (brackets[k].image) continue;
          if (!brackets[k].active) break;
          brackets[k].active = false;
        }
      }
      i = tail.end;
    } else if (c === '<') {
      // <https://...> and <mailto:...>
      const am = /<((?:https?:\/\/|mailto:)[^<>\s]*)>/iy;
      am.lastIndex = i;
      const r = am.exec(s);
      const href = r ? safeUrl(r[1]) : null;
      if (!href) { text += c; i++; continue; }
      flush();
      const a = { kind: 'auto', href, text: r[1], at: pieces.length, demoted: false };
      pieces.push(a);
      links.push(a);
      i += r[0].length;
    } else if (c === 'h' || c === 'H') {
      const j = bareUrlEnd(s, i, brackets.length > 0);
      const href = j > 0 ? safeUrl(s.slice(i, j)) : null;
      if (!href) { text += c; i++; continue; }
      flush();
      const a = { kind: 'auto', href, text: s.slice(i, j), at: pieces.length, demoted: false };
      pieces.push(a);
      links.push(a);
      i = j;
    } else {
      text += c; // a '!' not before '['
      i++;
    }
  }
  flush();
  processEmphasis(delims, null);
  let out = '';
  for (const p of pieces) {
    if (typeof p === 'string') out += p;
    else if (p.kind === 'a') out += p.demoted ? '' : openA(p.href);
    else if (p.kind === '/a') out += p.a.demoted ? '' : '</a>';
    else if (p.kind === 'auto') out += p.demoted ? escapeHtml(p.text) : `${openA(p.href)}${escapeHtml(p.text)}</a>`;
    else {
      // a delimiter run: the tags it closed, what is left of it as text, the tags it opened
      out += p.closes + escapeHtml(p.ch.repeat(p.count)) + p.opens;
    }
  }
  return out;
}

function unlink(list, d) {
  if (d.prev) d.prev.next = d.next; else list.head = d.next;
  if (d.next) d.next.prev = d.prev; else list.tail = d.prev;
  d.prev = d.next = null;
}

// CommonMark's "process emphasis" over the delimiters after bottom (null: all of them), with
// its openers_bottom bounds (kept as positions, robust to removals) that keep it linear.
function processEmphasis(list, bottom) {
  const floorOf = new Map();
  const bottomPos = bottom ? bottom.pos : -1;
  let closer = bottom ? bottom.next : list.head;
  while (closer) {
    if (!closer.canClose) { closer = closer.next; continue; }
    const key = closer.ch + (closer.canOpen ? '1' : '0') + (closer.orig % 3);
    const floor = Math.max(bottomPos, floorOf.has(key) ? floorOf.get(key) : -1);
    let opener = closer.prev, found = null;
    while (opener && opener.pos > floor) {
      if (opener.ch === closer.ch && opener.canOpen) {
        // the "rule of 3" (~~ runs are always 2 long)
        const odd = closer.ch !== '~' && (opener.canClose || closer.canOpen) &&
          (opener.orig + closer.orig) % 3 === 0 && !(opener.orig % 3 === 0 && closer.orig % 3 === 0);
        if (!odd) { found = opener; break; }
      }
      opener = opener.prev;
    }
    if (found) {
      const use = closer.ch === '~' ? 2 : found.count >= 2 && closer.count >= 2 ? 2 : 1;
      const tag = closer.ch === '~' ? 'del' : use === 2 ? 'strong' : 'em';
      found.count -= use;
      closer.count -= use;
      found.opens = `<${tag}>${found.opens}`; // each match encloses the earlier ones
      closer.closes += `</${tag}>`;
      for (let d = found.next; d !== closer; ) { const nx = d.next; unlink(list, d); d = nx; }
      if (found.count === 0) unlink(list, found);
      if (closer.count === 0) { const nx = closer.next; unlink(list, closer); closer = nx; }
    } else {
      floorOf.set(key, closer.prev ? closer.prev.pos : -1);
      const nx = closer.next;
      if (!closer.canOpen) unlink(list, closer);
      closer = nx;
    }
  }
  while (list.tail && list.tail.pos > bottomPos) unlink(list, list.tail);
}
