import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapeHtml, renderMarkdown as md, safeUrl } from '../src/markdown.js';

const A = 'target="_blank" rel="noopener noreferrer nofollow"';
const link = (href, text) => `<a href="${href}" ${A}>${text}</a>`;

// ---- a strict reader of the renderer's output ----

const TAGS = new Set(['p', 'br', 'strong', 'em', 'del', 'code', 'pre', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li',
  'blockquote', 'hr', 'a', 'table', 'thead', 'tbody', 'tr', 'th', 'td']);
const VOID = new Set(['br', 'hr']);
const ENTITIES = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };
const TAG = /<(\/?)([a-z0-9]+)((?: [a-z]+="[^"<>]*")*)>/y;
const decode = (s) => s.replace(/&(?:amp|lt|gt|quot|#39);/g, (e) => ENTITIES[e]);

// Checks that html holds only the allowed tags, with only the allowed attributes, properly
// nested, and that its text is fully escaped. Returns { text, hrefs } (both decoded).
function inspect(html) {
  const stack = [];
  const hrefs = [];
  let text = '';
  let i = 0;
  const fail = (why) => assert.fail(`${why} at ${i} in ${JSON.stringify(html.slice(Math.max(0, i - 40), i + 80))}`);
  while (i < html.length) {
    const c = html[i];
    if (c === '<') {
      TAG.lastIndex = i;
      const m = TAG.exec(html);
      if (!m) fail('a "<" that starts no tag');
      const [all, close, name, attrText] = m;
      if (!TAGS.has(name)) fail(`tag <${name}>`);
      const attrs = [...attrText.matchAll(/ ([a-z]+)="([^"<>]*)"/g)].map((a) => [a[1], a[2]]);
      for (const [, v] of attrs) {
        // inside a value: only the five entities, no raw quote
        if (/'/.test(v) || /&(?!(?:amp|lt|gt|quot|#39);)/.test(v)) fail(`attribute value ${v}`);
      }
      if (close) {
        if (attrs.length) fail('attributes on a closing tag');
        if (stack.pop() !== name) fail(`</${name}> closes nothing open`);
      } else {
        if (name === 'code') {
          if (attrs.length > 1 || (attrs.length === 1 && (attrs[0][0] !== 'class' || !/^language-[A-Za-z0-9_+-]{1,32}$/.test(attrs[0][1])))) {
            fail(`code attributes ${attrText}`);
          }
        } else if (name === 'a') {
          const names = attrs.map((a) => a[0]).join(' ');
          if (names !== 'href target rel' || attrs[1][1] !== '_blank' || attrs[2][1] !== 'noopener noreferrer nofollow') {
            fail(`a attributes ${attrText}`);
          }
          const href = decode(attrs[0][1]);
          if (!/^(?:https?:\/\/|mailto:)/i.test(href)) fail(`href ${href}`);
          if (/[\s\u0000-\u001f\u007f-\u009f]/.test(href)) fail(`href with a space or control: ${JSON.stringify(href)}`);
          hrefs.push(href);
        } else if (attrs.length) {
          fail(`attributes on <${name}>`);
        }
        if (!VOID.has(name)) stack.push(name);
      }
      i += all.length;
    } else if (c === '&') {
      const m = /^&(?:amp|lt|gt|quot|#39);/.exec(html.slice(i, i + 6));
      if (!m) fail('a raw "&"');
      text += ENTITIES[m[0]];
      i += m[0].length;
    } else {
      if (c === '>' || c === '"' || c === "'") fail(`a raw ${c}`);
      text += c;
      i++;
    }
  }
  if (stack.length) fail(`unclosed ${stack.join(' ')}`);
  return { text, hrefs };
}

// ---- escaping and URLs ----

test('escapeHtml escapes the five characters', () => {
  assert.equal(escapeHtml(`<a href="x" title='y'>&amp;</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;');
  assert.equal(escapeHtml('plain'), 'plain');
  assert.equal(escapeHtml(5), '5');
});

test('safeUrl allows absolute http, https and mailto only', () => {
  for (const ok of ['http://example.com', 'https://example.com/a?b=c&d=e#f', 'HTTPS://EXAMPLE.COM', 'mailto:a@b.c', 'MailTo:x', '  https://x.org  ']) {
    assert.equal(safeUrl(ok), ok.trim(), ok);
  }
  for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', ' javascript:alert(1)', 'java\tscript:alert(1)',
    'java\nscript:alert(1)', '\u0000javascript:alert(1)', '\u0001https://x.com', 'data:text/html,<script>alert(1)</script>',
    'vbscript:msgbox(1)', '//evil.com', '/relative', 'relative.html', '#frag', '', 'https:', 'https://', 'https:///x',
    'http:evil.com', 'mailto:', '&#106;avascript:alert(1)', 'https://ex ample.com', 'https://x.com/\u2028a',
    'https://x.com\u0085', 'ｈttps://x.com', 'file:///etc/passwd', 'blob:https://x.com/1', null, undefined, 42]) {
    assert.equal(safeUrl(bad), null, JSON.stringify(bad));
  }
});

// ---- the model's text cannot become markup ----

test('a script tag shows as text', () => {
  const out = md('<script>alert(1)</script>');
  assert.equal(out, '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
  assert.equal(inspect(out).text, '<script>alert(1)</script>');
});

test('an img with onerror shows as text', () => {
  assert.equal(md('<img src=x onerror=alert(1)>'), '<p>&lt;img src=x onerror=alert(1)&gt;</p>');
  assert.equal(md('a <b onmouseover="x">b</b>'), '<p>a &lt;b onmouseover=&quot;x&quot;&gt;b&lt;/b&gt;</p>');
});

test('an HTML comment shows as text', () => {
  assert.equal(md('<!-- hidden -->'), '<p>&lt;!-- hidden --&gt;</p>');
  assert.equal(md('<!--\n<script>x</script>\n-->'), '<p>&lt;!--<br>&lt;script&gt;x&lt;/script&gt;<br>--&gt;</p>');
});

test('entities are text, not decoded', () => {
  assert.equal(md('&lt;b&gt; &amp; &#106;'), '<p>&amp;lt;b&amp;gt; &amp;amp; &amp;#106;</p>');
});

test('unsafe link URLs give the text without a link', () => {
  for (const url of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', ' javascript:alert(1)', '<java\tscript:alert(1)>',
    '<javascript:alert(1)>', 'data:text/html;base64,PHNjcmlwdD4=', 'vbscript:msgbox(1)', '&#106;avascript:alert(1)',
    '//evil.com', '/local', 'page.html', '']) {
    const out = md(`[click](${url})`);
    assert.equal(out, '<p>click</p>', url);
  }
  // a tab inside the destination: not a link at all, just text
  const tab = md('[click](java\tscript:alert(1))');
  assert.ok(!tab.includes('<a'), tab);
  assert.equal(inspect(tab).text, '[click](java\tscript:alert(1))');
  assert.ok(!md('<javascript:alert(1)>').includes('<a'));
  assert.ok(!md('![x](javascript:alert(1))').includes('<a'));
});

test('a quote in a URL cannot leave the href attribute', () => {
  const out = md('[x](https://a.com/"onmouseover="alert(1))');
  assert.equal(out, `<p>${link('https://a.com/&quot;onmouseover=&quot;alert(1)', 'x')}</p>`);
  inspect(out);
  const out2 = md("[x](https://a.com/'><script>alert(1)</script>)");
  inspect(out2);
  assert.ok(!/<script/i.test(out2));
  const out3 = md('https://a.com/x"onmouseover="alert(1)');
  inspect(out3);
  assert.ok(!out3.includes('"onmouseover'), out3);
});

test('code blocks and spans escape their content', () => {
  assert.equal(md('```\n<b>bold</b>\n</code></pre><script>alert(1)</script>\n```'),
    '<pre><code>&lt;b&gt;bold&lt;/b&gt;\n&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;</code></pre>');
  assert.equal(md('`</code><script>`'), '<p><code>&lt;/code&gt;&lt;script&gt;</code></p>');
  assert.equal(md('`**not bold** [x](https://a.b)`'), '<p><code>**not bold** [x](https://a.b)</code></p>');
});

test('a fence info string cannot inject into the class attribute', () => {
  assert.equal(md('```"><script>alert(1)</script>\nx\n```'), '<pre><code>x</code></pre>');
  assert.equal(md('~~~js" onclick="x\ny\n~~~'), '<pre><code>y</code></pre>');
  assert.equal(md('```js onclick=x\ny\n```'), '<pre><code class="language-js">y</code></pre>');
  assert.equal(md(`\`\`\`${'a'.repeat(33)}\nz\n\`\`\``), '<pre><code>z</code></pre>');
  assert.equal(md('```c++\nint x;\n```'), '<pre><code class="language-c++">int x;</code></pre>');
  assert.equal(md('```objective-c_2\nx\n```'), '<pre><code class="language-objective-c_2">x</code></pre>');
});

// ---- markdown ----

test('headings', () => {
  assert.equal(md('# One\n## Two ##\n###### Six\n####### seven'),
    '<h1>One</h1><h2>Two</h2><h6>Six</h6><p>####### seven</p>');
  assert.equal(md('#hashtag'), '<p>#hashtag</p>');
  assert.equal(md('# *em* and `code`'), '<h1><em>em</em> and <code>code</code></h1>');
  assert.equal(md('# C#'), '<h1>C#</h1>');
});

test('paragraphs, and line breaks inside them', () => {
  assert.equal(md('one\ntwo\n\nthree'), '<p>one<br>two</p><p>three</p>');
  assert.equal(md('  indented  \n   lines'), '<p>indented<br>lines</p>');
  assert.equal(md(''), '');
  assert.equal(md('\n\n  \n'), '');
  assert.equal(md('a\r\nb\rc'), '<p>a<br>b<br>c</p>');
});

test('emphasis, strong and strike', () => {
  assert.equal(md('**bold** __bold__ *it* _it_ ~~gone~~'),
    '<p><strong>bold</strong> <strong>bold</strong> <em>it</em> <em>it</em> <del>gone</del></p>');
  assert.equal(md('***both***'), '<p><em><strong>both</strong></em></p>');
  assert.equal(md('**bold *and it* too**'), '<p><strong>bold <em>and it</em> too</strong></p>');
  assert.equal(md('a * b * c'), '<p>a * b * c</p>');
  assert.equal(md('2*3*4'), '<p>2<em>3</em>4</p>');
  assert.equal(md('~one~ ~~~three~~~'), '<p>~one~ ~~~three~~~</p>');
  assert.equal(md('**unclosed'), '<p>**unclosed</p>');
  assert.equal(md('*a\nb*'), '<p><em>a<br>b</em></p>');
});

test('snake_case stays as it is', () => {
  assert.equal(md('snake_case_name and __init__ and a_b'), '<p>snake_case_name and <strong>init</strong> and a_b</p>');
  assert.equal(md('call my_func_name(x_y)'), '<p>call my_func_name(x_y)</p>');
  assert.equal(md('_a_b_'), '<p><em>a_b</em></p>');
});

test('backslash escapes', () => {
  assert.equal(md('\\*not\\* \\_no\\_ \\`x\\` \\[a](b) \\\\ \\q'), '<p>*not* _no_ `x` [a](b) \\ \\q</p>');
});

test('code spans', () => {
  assert.equal(md('use `a*b*c` here'), '<p>use <code>a*b*c</code> here</p>');
  assert.equal(md('`` a`b ``'), '<p><code>a`b</code></p>');
  assert.equal(md('`unclosed and *em*'), '<p>`unclosed and <em>em</em></p>');
  assert.equal(md('``one` two``'), '<p><code>one` two</code></p>');
  assert.equal(md('`a\nb`'), '<p><code>a b</code></p>');
});

test('links', () => {
  assert.equal(md('[site](https://example.com)'), `<p>${link('https://example.com', 'site')}</p>`);
  assert.equal(md('[site](https://example.com "The title")'), `<p>${link('https://example.com', 'site')}</p>`);
  assert.equal(md('[**b**](https://x.org/a_(b)_c)'), `<p>${link('https://x.org/a_(b)_c', '<strong>b</strong>')}</p>`);
  assert.equal(md('[a](<https://x.org/a b>)'), '<p>a</p>'); // a space: refused
  assert.equal(md('[mail](mailto:me@x.org)'), `<p>${link('mailto:me@x.org', 'mail')}</p>`);
  assert.equal(md('[a](https://x.org?a=1&b=2)'), `<p>${link('https://x.org?a=1&amp;b=2', 'a')}</p>`);
  assert.equal(md('[not a link] (https://x.org)'), `<p>[not a link] (${link('https://x.org', 'https://x.org')})</p>`);
  assert.equal(md('[a [b](https://b.org) c](https://c.org)'), `<p>[a ${link('https://b.org', 'b')} c](${link('https://c.org', 'https://c.org')})</p>`);
  assert.equal(md('![alt](https://x.org/i.png)'), `<p>${link('https://x.org/i.png', 'alt')}</p>`);
  assert.equal(md('[![alt](https://x.org/i.png)](https://x.org)'), `<p>${link('https://x.org', 'alt')}</p>`);
  assert.equal(md('[unclosed](https://x.org'), `<p>[unclosed](${link('https://x.org', 'https://x.org')}</p>`);
});

test('bare autolinks', () => {
  assert.equal(md('see https://example.com/a_b.'), `<p>see ${link('https://example.com/a_b', 'https://example.com/a_b')}.</p>`);
  assert.equal(md('(http://x.org/a_(b))'), `<p>(${link('http://x.org/a_(b)', 'http://x.org/a_(b)')})</p>`);
  assert.equal(md('**https://x.org**'), `<p><strong>${link('https://x.org', 'https://x.org')}</strong></p>`);
  assert.equal(md('[https://x.org](https://x.org)'), `<p>${link('https://x.org', 'https://x.org')}</p>`);
  assert.equal(md('<https://x.org/a>'), `<p>${link('https://x.org/a', 'https://x.org/a')}</p>`);
  assert.equal(md('xhttps://x.org'), '<p>xhttps://x.org</p>');
  assert.equal(md('https://'), '<p>https://</p>');
  assert.equal(md('`https://x.org`'), '<p><code>https://x.org</code></p>');
});

test('lists', () => {
  assert.equal(md('- a\n- b\n* c'), '<ul><li>a</li><li>b</li></ul><ul><li>c</li></ul>');
  assert.equal(md('1. one\n2. two\n10. ten'), '<ol><li>one</li><li>two</li><li>ten</li></ol>');
  assert.equal(md('1) one\n2) two'), '<ol><li>one</li><li>two</li></ol>');
  assert.equal(md('Items:\n- a\n- b'), '<p>Items:</p><ul><li>a</li><li>b</li></ul>');
  assert.equal(md('- a\n\n- b'), '<ul><li><p>a</p></li><li><p>b</p></li></ul>');
  assert.equal(md('- a\ncontinued\n- b'), '<ul><li>a<br>continued</li><li>b</li></ul>');
  assert.equal(md('- a\n\n  more\n- b'), '<ul><li><p>a</p><p>more</p></li><li><p>b</p></li></ul>');
  assert.equal(md('- **bold** item'), '<ul><li><strong>bold</strong> item</li></ul>');
  assert.equal(md('-not a list\n+1 neither'), '<p>-not a list<br>+1 neither</p>');
  assert.equal(md('The year\n2024. was long'), '<p>The year<br>2024. was long</p>');
  assert.equal(md('- a\n- b\n\nafter'), '<ul><li>a</li><li>b</li></ul><p>after</p>');
});

test('nested lists', () => {
  assert.equal(md('- a\n  - b\n    - c\n  - d\n- e'),
    '<ul><li>a<ul><li>b<ul><li>c</li></ul></li><li>d</li></ul></li><li>e</li></ul>');
  assert.equal(md('1. first\n   - x\n   - y\n2. second'), '<ol><li>first<ul><li>x</li><li>y</li></ul></li><li>second</li></ol>');
  // two spaces under "1." nest too (as people type them)
  assert.equal(md('1. first\n  - x\n2. second'), '<ol><li>first<ul><li>x</li></ul></li><li>second</li></ol>');
  assert.equal(md('- a\n\t- b'), '<ul><li>a<ul><li>b</li></ul></li></ul>');
});

test('fenced code in a list item', () => {
  assert.equal(md('1. Run:\n   ```sh\n   make\n\n   make test\n   ```\n2. Done'),
    '<ol><li>Run:<pre><code class="language-sh">make\n\nmake test</code></pre></li><li>Done</li></ol>');
});

test('blockquotes', () => {
  assert.equal(md('> quoted\n> **text**'), '<blockquote><p>quoted<br><strong>text</strong></p></blockquote>');
  assert.equal(md('> a\n>\n> b'), '<blockquote><p>a</p><p>b</p></blockquote>');
  assert.equal(md('> > nested\n> - item'), '<blockquote><blockquote><p>nested</p></blockquote><ul><li>item</li></ul></blockquote>');
  assert.equal(md('>no space'), '<blockquote><p>no space</p></blockquote>');
  assert.equal(md('text\n> quote'), '<p>text</p><blockquote><p>quote</p></blockquote>');
  assert.equal(md('a > b'), '<p>a &gt; b</p>');
});

test('thematic breaks', () => {
  assert.equal(md('a\n\n---\n\n***\n___\n- - -\nb'), '<p>a</p><hr><hr><hr><hr><p>b</p>');
  assert.equal(md('--'), '<p>--</p>');
});

test('tables', () => {
  assert.equal(md('| Name | Value |\n|------|:-----:|\n| a | **1** |\n| b |\n| c | 3 | extra |\n\nafter'),
    '<table><thead><tr><th>Name</th><th>Value</th></tr></thead><tbody>' +
    '<tr><td>a</td><td><strong>1</strong></td></tr><tr><td>b</td><td></td></tr><tr><td>c</td><td>3</td></tr>' +
    '</tbody></table><p>after</p>');
  assert.equal(md('a | b\n--|--'), '<table><thead><tr><th>a</th><th>b</th></tr></thead></table>');
  assert.equal(md('| `a\\|b` | c\\|d |\n|---|---|'), '<table><thead><tr><th><code>a|b</code></th><th>c|d</th></tr></thead></table>');
  assert.equal(md('Text before\n| a | b |\n|---|---|\n| 1 | 2 |'),
    '<p>Text before</p><table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>');
  // not tables: cell counts differ, no delimiter row
  assert.equal(md('| a | b |\n|---|\n'), '<p>| a | b |<br>|---|</p>');
  assert.equal(md('a | b\nc | d'), '<p>a | b<br>c | d</p>');
});

test('fenced code', () => {
  assert.equal(md('```python\ndef f():\n    return 1\n```'),
    '<pre><code class="language-python">def f():\n    return 1</code></pre>');
  assert.equal(md('~~~\n```\nnot closed by backticks\n~~~'), '<pre><code>```\nnot closed by backticks</code></pre>');
  assert.equal(md('````\n```\n````'), '<pre><code>```</code></pre>');
  assert.equal(md('```js```'), '<p><code>js</code></p>'); // a code span, not a fence
  assert.equal(md('para\n```\ncode\n```\nafter'), '<p>para</p><pre><code>code</code></pre><p>after</p>');
  assert.equal(md('  ```\n  indented\n    more\n  ```'), '<pre><code>indented\n  more</code></pre>');
  assert.equal(md('```go\n\tfmt.Println(1)\n```'), '<pre><code class="language-go">\tfmt.Println(1)</code></pre>');
});

test('an unclosed fence (a reply still streaming) is code to the end', () => {
  assert.equal(md('Here:\n```js\nconst a = "<b>";\n\n# not a heading'),
    '<p>Here:</p><pre><code class="language-js">const a = &quot;&lt;b&gt;&quot;;\n\n# not a heading</code></pre>');
  assert.equal(md('```'), '<pre><code></code></pre>');
  assert.equal(md('> ```\n> code'), '<blockquote><pre><code>code</code></pre></blockquote>');
});

test('deep nesting is capped, not a stack overflow', () => {
  inspect(md('>'.repeat(100000)));
  inspect(md('> '.repeat(50000) + 'x'));
  inspect(md('- '.repeat(50000) + 'x'));
  const stairs = md(Array.from({ length: 300 }, (_, i) => `${' '.repeat(2 * i)}- x`).join('\n'));
  inspect(stairs);
  assert.equal(stairs.split('<ul>').length - 1, 12); // 12 levels of lists, then text

});

// ---- time ----

const N = 100000;
const HEAVY = {
  stars: '*'.repeat(N),
  starsInText: `a${'*'.repeat(N)}b`,
  brackets: '['.repeat(N),
  closeBrackets: ']'.repeat(N),
  backticks: '`'.repeat(N),
  backtickRuns: Array.from({ length: 2000 }, (_, i) => '`'.repeat(i % 50 + 1) + 'x').join(''),
  starA: '*a'.repeat(N / 2),
  starSpace: 'a* '.repeat(N / 3),
  underscores: '_a'.repeat(N / 2),
  mixed: '*_'.repeat(N / 2),
  mixedText: '*a_b**c__d'.repeat(N / 10),
  strikes: '~~a'.repeat(N / 3),
  linkOpens: '[a]('.repeat(N / 4),
  linkParens: '['.repeat(N / 8) + '](' + ']()'.repeat(N / 4),
  linkTails: '[x](https://a.b/'.repeat(N / 16),
  images: '!['.repeat(N / 2),
  angle: '<https://x'.repeat(N / 10),
  lt: '<'.repeat(N),
  urls: '(https://a'.repeat(N / 10),
  urlParens: 'https://a' + ')'.repeat(N),
  backslashes: '\\'.repeat(N),
  pipes: '|'.repeat(N) + '\n' + '|-'.repeat(N / 2),
  pipeRows: '|a|b|\n|-|-|\n' + '|x\n'.repeat(N / 3),
  hashes: '#'.repeat(N),
  headingSpaces: '# ' + ' '.repeat(N) + 'x',
  quotes: '> '.repeat(N / 2),
  lists: '- '.repeat(N / 2),
  listLines: '- a\n  b\n\n'.repeat(N / 10),
  nestedListLines: Array.from({ length: 1000 }, (_, i) => `${' '.repeat(2 * (i % 20))}- x`).join('\n'),
  fences: '```\n'.repeat(N / 4),
  newlines: 'a\n'.repeat(N / 2),
  spaces: ' '.repeat(N) + 'x' + ' '.repeat(N),
};

for (const [name, src] of Object.entries(HEAVY)) {
  test(`linear time: ${name}`, () => {
    const t0 = performance.now();
    const out = md(src);
    const ms = performance.now() - t0;
    assert.ok(ms < 1000, `${name}: ${ms.toFixed(0)} ms`);
    inspect(out);
  });
}

// ---- fuzz ----

// A small seeded generator (mulberry32), so a failure can be reproduced.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomSource(rand, atoms, maxLen) {
  const len = Math.floor(rand() * maxLen);
  let s = '';
  for (let i = 0; i < len; i++) s += atoms[Math.floor(rand() * atoms.length)];
  return s;
}

const META = [...'<>"\'&*_`[]()!#|~-:/\\ \n', '\n\n', '  ', '    ', '\t', '\r\n', '1.', '> ', '- ', '```', '~~~', '---', '|---|'];
const WORDS = ['a', 'b', 'x', 'Q', 'z9', 'javascript:', 'JaVaScRiPt:', 'http://', 'https://', 'mailto:', 'data:', 'onerror=',
  '&#106;', '&lt;', '<img ', 'src=x', '-->', '<!--', '"', 'alert(1)', '\u0000', '\u2028', '\u00e9', '\u{1F600}', '\uFEFF'];

test('fuzz: only allowed tags and attributes, safe hrefs, no <script in the text', () => {
  const rand = rng(12345);
  const atoms = [...META, ...META, ...WORDS];
  for (let k = 0; k < 2000; k++) {
    const src = randomSource(rand, atoms, 120);
    let out;
    assert.doesNotThrow(() => { out = md(src); }, JSON.stringify(src));
    const { text } = inspect(out);
    assert.ok(!text.toLowerCase().includes('<script'), JSON.stringify(src));
  }
});

test('fuzz: source full of HTML still gives only allowed markup', () => {
  const rand = rng(67890);
  const atoms = [...META, ...WORDS, '<script>', '</script>', '</code></pre><script>', '"><script>', "'><svg onload=x>",
    '[x](', ')', '](javascript:alert(1))', '](https://a.b/"><script>)', '<https://a.b/">', '`', '**', '__'];
  for (let k = 0; k < 2000; k++) {
    const src = randomSource(rand, atoms, 80);
    const out = md(src);
    inspect(out);
    assert.ok(!/<(?!\/?(?:p|br|strong|em|del|code|pre|h[1-6]|ul|ol|li|blockquote|hr|a|table|thead|tbody|tr|th|td)[ >])/.test(out), JSON.stringify(src));
  }
});

test('renderMarkdown takes any value', () => {
  assert.equal(md(null), '');
  assert.equal(md(undefined), '');
  assert.equal(md(42), '<p>42</p>');
  assert.equal(md('a\0b'), '<p>a\uFFFDb</p>');
});
