#include "grammar/json_string_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "grammar/grammar.h"
#include "grammar/grammar_builder.h"

namespace lumen {

// ---- CodePointSet -----------------------------------------------------------------------------

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

}  // namespace

CodePointSet CodePointSet::all() { return range(0, kMaxCodePoint); }

CodePointSet CodePointSet::range(char32_t lo, char32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

void CodePointSet::add(char32_t lo, char32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  // Surrogates are not characters: a range across them is split around them.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) add(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) add(kSurrogateHi + 1, hi);
    return;
  }
  std::vector<Range> out;
  out.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const Range& r : ranges_) {
    if (r.second + 1 < lo || placed) {
      out.push_back(r);
    } else if (hi + 1 < r.first) {
      out.emplace_back(lo, hi);
      out.push_back(r);
      placed = true;
    } else {  // overlapping or adjacent: absorb
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) out.emplace_back(lo, hi);
  // Ranges that only touch across the surrogate gap stay apart; that is harmless.
  ranges_ = std::move(out);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const Range& r : other.ranges_) add(r.first, r.second);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  char32_t next = 0;
  for (const Range& r : ranges_) {
    if (r.first > next) out.add(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out;
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const {
  CodePointSet out;
  for (const Range& a : ranges_)
    for (const Range& b : other.ranges_) {
      const char32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
      if (lo <= hi) out.add(lo, hi);
    }
  return out;
}

bool CodePointSet::contains(char32_t c) const {
  const auto it = std::upper_bound(ranges_.begin(), ranges_.end(), Range{c, kMaxCodePoint + 1});
  return it != ranges_.begin() && std::prev(it)->second >= c && std::prev(it)->first <= c;
}

// ---- UTF-8 ------------------------------------------------------------------------------------

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) throw GrammarError(fmt::format("malformed UTF-8 at byte {}", i));
    char32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < n; k++) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) throw GrammarError(fmt::format("malformed UTF-8 at byte {}", i));
      c = (c << 6) | (b & 0x3F);
    }
    static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};  // shortest forms only
    if (c < kMin[n] || c > kMaxCodePoint || (c >= kSurrogateLo && c <= kSurrogateHi))
      throw GrammarError(fmt::format("malformed UTF-8 at byte {}", i));
    out += c;
    i += n;
  }
  return out;
}

std::string encode_utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  for (const char32_t c : s) out += encode_utf8(c);
  return out;
}

// ---- spellings --------------------------------------------------------------------------------

namespace {

bool is_alnum(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// A class member: letters and digits as they are, everything else escaped (no character of
// the class syntax can be misread).
std::string class_char(char32_t c) {
  if (is_alnum(c)) return std::string(1, static_cast<char>(c));
  if (c < 0x80) return fmt::format("\\x{:02X}", static_cast<unsigned>(c));
  if (c <= 0xFFFF) return fmt::format("\\u{:04X}", static_cast<unsigned>(c));
  return fmt::format("\\U{:08X}", static_cast<unsigned>(c));
}

// A character written raw inside a JSON string with no other spelling the grammar takes.
bool plain(char32_t c) { return c >= 0x20 && c != '"' && c != '\\' && c != '/'; }

std::string alternation(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); i++) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

}  // namespace

std::string grammar_char_class(const CodePointSet& set) {
  std::string out = "[";
  for (const auto& [lo, hi] : set.ranges()) {
    out += class_char(lo);
    if (hi > lo + 1) out += '-';
    if (hi > lo) out += class_char(hi);
  }
  return out + "]";
}

std::optional<std::string> json_char_spelling(const CodePointSet& set) {
  std::vector<std::string> alts;
  CodePointSet raw = set.intersect(CodePointSet::range(0x20, kMaxCodePoint));
  raw = raw.intersect(CodePointSet::of('"').complement()).intersect(CodePointSet::of('\\').complement());
  if (!raw.empty()) {
    const auto& r = raw.ranges();
    if (r.size() == 1 && r[0].first == r[0].second) alts.push_back(grammar_literal(encode_utf8(r[0].first)));
    else alts.push_back(grammar_char_class(raw));
  }
  static constexpr std::pair<char32_t, char> kShort[] = {{'"', '"'},  {'\\', '\\'}, {'/', '/'}, {0x08, 'b'},
                                                         {0x0C, 'f'}, {0x0A, 'n'},  {0x0D, 'r'}, {0x09, 't'}};
  std::string letters;
  for (const auto& [c, e] : kShort)
    if (set.contains(c)) letters += e;
  if (letters.size() == 1) {
    alts.push_back(grammar_literal(std::string("\\") + letters));
  } else if (!letters.empty()) {
    CodePointSet ls;
    for (const char e : letters) ls.add(static_cast<unsigned char>(e), static_cast<unsigned char>(e));
    alts.push_back(grammar_literal("\\") + " " + grammar_char_class(ls));
  }
  // \u00XX for control characters: grouped by the high hex digit, the low one in either case.
  for (int high = 0; high < 2; high++) {
    CodePointSet low;
    for (int l = 0; l < 16; l++) {
      if (!set.contains(static_cast<char32_t>(high * 16 + l))) continue;
      const char digit = "0123456789abcdef"[l];
      low.add(static_cast<unsigned char>(digit), static_cast<unsigned char>(digit));
      if (l >= 10) low.add(static_cast<unsigned char>(digit - 32), static_cast<unsigned char>(digit - 32));
    }
    if (!low.empty()) alts.push_back(grammar_literal(fmt::format("\\u00{}", high)) + " " + grammar_char_class(low));
  }
  if (alts.empty()) return std::nullopt;
  // A single alternative of two atoms ("\\" [nt]) is not one atom: parenthesise it.
  if (alts.size() == 1 && alts[0].find(' ') != std::string::npos) return "( " + alts[0] + " )";
  return alternation(alts);
}

std::string json_string_literal(std::u32string_view content) {
  std::string out, run = "\"";
  const auto flush = [&] {
    if (run.empty()) return;
    if (!out.empty()) out += ' ';
    out += grammar_literal(run);
    run.clear();
  };
  for (const char32_t c : content) {
    if (plain(c)) {
      run += encode_utf8(c);
      continue;
    }
    flush();
    out += ' ';
    out += *json_char_spelling(CodePointSet::of(c));
  }
  run += '"';
  flush();
  return out;
}

std::string json_string_except(const std::vector<std::u32string>& keys, GrammarBuilder& b,
                               const std::string& hint) {
  struct Node {
    std::map<char32_t, int> kids;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::u32string& key : keys) {
    int n = 0;
    for (const char32_t c : key) {
      const auto it = trie[n].kids.find(c);
      if (it != trie[n].kids.end()) {
        n = it->second;
        continue;
      }
      if (trie.size() >= b.max_rules())
        throw GrammarError(fmt::format("the grammar would have more than {} rules (property names)", b.max_rules()));
      const int next = static_cast<int>(trie.size());
      trie[n].kids.emplace(c, next);
      trie.emplace_back();  // may move the nodes: nothing of trie[n] is held across it
      n = next;
    }
    trie[n].terminal = true;
  }
  // Leaving the trie: any character but the node's children, then anything up to the quote.
  const std::string any_char = b.intern("key-char", *json_char_spelling(CodePointSet::all()));
  const std::string tail = b.intern("key-tail", any_char + "* " + grammar_literal("\""));
  std::vector<std::string> names(trie.size());
  for (size_t i = 0; i < trie.size(); i++) names[i] = b.reserve(hint + "-key");
  // Children come after their parents in `trie`: defining from the end needs no recursion.
  for (size_t i = trie.size(); i-- > 0;) {
    const Node& node = trie[i];
    std::vector<std::string> alts;
    if (!node.terminal) alts.push_back(grammar_literal("\""));
    CodePointSet taken;
    for (const auto& [c, child] : node.kids) {
      alts.push_back(*json_char_spelling(CodePointSet::of(c)) + " " + names[child]);
      taken.add(c, c);
    }
    if (const auto other = json_char_spelling(taken.complement())) alts.push_back(*other + " " + tail);
    std::string body;
    for (size_t k = 0; k < alts.size(); k++) body += (k ? " | " : "") + alts[k];
    b.define(names[i], body);
  }
  return grammar_literal("\"") + " " + names[0];
}

}  // namespace lumen
