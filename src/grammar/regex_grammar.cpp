#include "grammar/regex_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

#include "grammar/grammar_builder.h"
#include "grammar/json_string_grammar.h"

namespace lumen {

namespace {

constexpr int kUnbounded = -1;
constexpr int kMaxCount = 10000;

struct Node {
  enum class Kind { Set, Concat, Alt, Repeat, Start, End };
  Kind kind = Kind::Concat;
  CodePointSet set;         // Set
  std::vector<Node> kids;   // Concat, Alt, Repeat (one)
  int min = 1, max = 1;     // Repeat; max kUnbounded for no bound
};

CodePointSet digits() { return CodePointSet::range('0', '9'); }

CodePointSet word() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}

// ECMAScript's WhiteSpace and LineTerminator.
CodePointSet unicode_space() {
  CodePointSet s = CodePointSet::range(0x09, 0x0D);
  for (const char32_t c : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) s.add(c, c);
  s.add(0x2000, 0x200A);
  return s;
}

// Engines disagree beyond ASCII (Python's \s has no U+FEFF, std::regex's none of the Unicode
// spaces): \s writes only the ASCII spaces all count, \S only characters none counts as space.
CodePointSet ascii_space() {
  CodePointSet s = CodePointSet::range(0x09, 0x0D);
  s.add(0x20, 0x20);
  return s;
}

CodePointSet dot() {
  CodePointSet s;
  for (const char32_t c : {0x0Au, 0x0Du, 0x2028u, 0x2029u}) s.add(c, c);
  return s.complement();
}

class Parser {
 public:
  Parser(std::u32string p, const RegexLimits& limits) : p_(std::move(p)), limits_(limits) {}

  Node parse() {
    Node n = alternation(0);
    if (pos_ < p_.size()) fail("unmatched )");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw RegexError(fmt::format("pattern: {} at offset {}", what, pos_));
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char32_t peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }
  bool eat(char32_t c) {
    if (at_end() || p_[pos_] != c) return false;
    pos_++;
    return true;
  }

  Node alternation(int depth) {
    Node alt;
    alt.kind = Node::Kind::Alt;
    alt.kids.push_back(sequence(depth));
    while (eat('|')) alt.kids.push_back(sequence(depth));
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node sequence(int depth) {
    Node seq;
    seq.kind = Node::Kind::Concat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      seq.kids.push_back(atom(depth));
      quantifier(seq.kids.back());
    }
    return seq;
  }

  Node set_node(CodePointSet s) {
    Node n;
    n.kind = Node::Kind::Set;
    n.set = std::move(s);
    return n;
  }

  Node atom(int depth) {
    const char32_t c = p_[pos_++];
    switch (c) {
      case '(': return group(depth);
      case '[': return set_node(char_class());
      case '.': return set_node(dot());
      case '\\': return set_node(escape(false).set);
      case '^': { Node n; n.kind = Node::Kind::Start; return n; }
      case '$': { Node n; n.kind = Node::Kind::End; return n; }
      case '*': case '+': case '?': pos_--; fail("nothing to repeat");
      case '{': pos_--; fail("a literal { must be written \\{");
      default: return set_node(CodePointSet::of(c));
    }
  }

  Node group(int depth) {
    if (depth + 1 > limits_.max_nesting) fail(fmt::format("groups nest deeper than {}", limits_.max_nesting));
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '=' || peek() == '!' || (peek() == '<' && (peek(1) == '=' || peek(1) == '!'))) {
        fail("lookaround assertions are not supported");
      } else if (eat('<')) {  // a named group matches like a plain one
        while (!at_end() && peek() != '>') pos_++;
        if (!eat('>')) fail("unterminated group name");
      } else {
        fail("unsupported group (?");
      }
    }
    Node inner = alternation(depth + 1);
    if (!eat(')')) fail("missing )");
    return inner;
  }

  // {m}, {m,}, {m,n}; false (position unchanged) when the text is no quantifier.
  bool counted(int& min, int& max) {
    const size_t start = pos_;
    const auto number = [&](int& out) {
      if (at_end() || peek() < '0' || peek() > '9') return false;
      int64_t v = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        v = std::min<int64_t>(v * 10 + (peek() - '0'), int64_t{1} << 40);
        pos_++;
      }
      if (v > kMaxCount) fail(fmt::format("a repetition count above {}", kMaxCount));
      out = static_cast<int>(v);
      return true;
    };
    pos_++;  // {
    if (number(min)) {
      max = min;
      if (eat(',')) {
        max = kUnbounded;
        if (!at_end() && peek() != '}' && !number(max)) max = -2;
      }
      if (max != -2 && eat('}')) {
        if (max != kUnbounded && max < min) fail("repetition counts out of order");
        return true;
      }
    }
    pos_ = start;
    return false;
  }

  void quantifier(Node& target) {
    if (at_end()) return;
    int min, max;
    const char32_t c = peek();
    if (c == '*') min = 0, max = kUnbounded, pos_++;
    else if (c == '+') min = 1, max = kUnbounded, pos_++;
    else if (c == '?') min = 0, max = 1, pos_++;
    else if (c == '{') {
      if (!counted(min, max)) fail("a literal { must be written \\{");
    } else {
      return;
    }
    if (target.kind == Node::Kind::Start || target.kind == Node::Kind::End) fail("nothing to repeat");
    eat('?');  // lazy: the same strings match
    if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) fail("nothing to repeat");
    Node rep;
    rep.kind = Node::Kind::Repeat;
    rep.min = min;
    rep.max = max;
    rep.kids.push_back(std::move(target));
    target = std::move(rep);
  }

  struct Escaped {
    CodePointSet set;
    bool single = false;
    char32_t c = 0;
  };
  static Escaped one(char32_t c) { return {CodePointSet::of(c), true, c}; }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
      const char32_t h = peek();
      int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
            : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
      if (d < 0) fail(fmt::format("expected {} hex digits", n));
      v = v * 16 + d;
      pos_++;
    }
    return v;
  }

  // After a backslash. In a negated class \s and \S take the opposite reading of the spaces
  // engines disagree on, so that after the complement they still write only agreed ones.
  Escaped escape(bool in_class, bool negated = false) {
    if (at_end()) fail("a pattern cannot end in \\");
    const char32_t c = p_[pos_++];
    switch (c) {
      case 'd': return {digits()};
      case 'D': return {digits().complement()};
      case 'w': return {word()};
      case 'W': return {word().complement()};
      case 's': return {negated ? unicode_space() : ascii_space()};
      case 'S': return {negated ? ascii_space().complement() : unicode_space().complement()};
      case 't': return one(0x09);
      case 'n': return one(0x0A);
      case 'v': return one(0x0B);
      case 'f': return one(0x0C);
      case 'r': return one(0x0D);
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("octal escapes are not supported");
        return one(0);
      case 'x': return one(hex(2));
      case 'u': {
        if (peek() == '{') fail("\\u{...} escapes are not supported");
        char32_t v = hex(4);
        if (v >= 0xDC00 && v <= 0xDFFF) fail("a lone surrogate escape");
        if (v >= 0xD800 && v <= 0xDBFF) {
          if (peek() != '\\' || peek(1) != 'u') fail("a lone surrogate escape");
          pos_ += 2;
          const char32_t lo = hex(4);
          if (lo < 0xDC00 || lo > 0xDFFF) fail("a lone surrogate escape");
          v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        }
        return one(v);
      }
      case 'b':
        if (in_class) return one(0x08);
        fail("word boundaries (\\b) are not supported");
      case 'B': fail("word boundaries (\\B) are not supported");
      case 'c': fail("control escapes (\\c) are not supported");
      case 'k': fail("backreferences are not supported");
      case 'p': case 'P': fail("Unicode property escapes are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') fail("backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      fail(fmt::format("unsupported escape \\{}", static_cast<char>(c)));
    return one(c);
  }

  // After [.
  CodePointSet char_class() {
    const bool negate = eat('^');
    CodePointSet set;
    const auto member = [&]() -> Escaped {
      const char32_t c = p_[pos_++];
      return c == '\\' ? escape(true, negate) : one(c);
    };
    while (true) {
      if (at_end()) fail("missing ]");
      if (eat(']')) break;
      const Escaped lo = member();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < p_.size()) {
        pos_++;
        const Escaped hi = member();
        if (!lo.single || !hi.single) fail("a class escape cannot bound a range");
        if (hi.c < lo.c) fail("a class range out of order");
        set.add(lo.c, hi.c);
      } else {
        set.add(lo.set);
      }
    }
    return negate ? set.complement() : set;
  }

  std::u32string p_;
  RegexLimits limits_;
  size_t pos_ = 0;
};

uint64_t expansion(const Node& n, uint64_t cap) {
  switch (n.kind) {
    case Node::Kind::Set: return 1;
    case Node::Kind::Start: case Node::Kind::End: return 0;
    case Node::Kind::Repeat: {
      const uint64_t count = n.max == kUnbounded ? uint64_t(n.min) + 1 : uint64_t(n.max);
      return std::min(cap + 1, expansion(n.kids[0], cap) * std::max<uint64_t>(count, 1));
    }
    default: {
      uint64_t sum = 0;
      for (const Node& k : n.kids) sum = std::min(cap + 1, sum + expansion(k, cap));
      return sum;
    }
  }
}

bool has_anchor(const Node& n) {
  if (n.kind == Node::Kind::Start || n.kind == Node::Kind::End) return true;
  return std::any_of(n.kids.begin(), n.kids.end(), has_anchor);
}

// One top-level alternative without its ^ and $.
struct TopAlternative {
  Node body;
  bool anchored_start = false, anchored_end = false;
};

std::vector<TopAlternative> parse_pattern(std::string_view pattern, const RegexLimits& limits) {
  std::u32string text;
  try {
    text = decode_utf8(pattern);
  } catch (const GrammarError& e) {
    throw RegexError(fmt::format("pattern: {}", e.what()));
  }
  Node root = Parser(std::move(text), limits).parse();
  if (expansion(root, limits.max_expansion) > limits.max_expansion)
    throw RegexError(fmt::format("pattern: expands to more than {} characters of grammar", limits.max_expansion));
  std::vector<Node> alts;
  if (root.kind == Node::Kind::Alt) alts = std::move(root.kids);
  else alts.push_back(std::move(root));
  std::vector<TopAlternative> out;
  for (Node& alt : alts) {
    TopAlternative t;
    if (alt.kind != Node::Kind::Concat) {
      Node seq;
      seq.kids.push_back(std::move(alt));
      alt = std::move(seq);
    }
    auto& kids = alt.kids;
    if (!kids.empty() && kids.front().kind == Node::Kind::Start) {
      t.anchored_start = true;
      kids.erase(kids.begin());
    }
    if (!kids.empty() && kids.back().kind == Node::Kind::End) {
      t.anchored_end = true;
      kids.pop_back();
    }
    if (has_anchor(alt)) throw RegexError("pattern: ^ and $ are supported only at the start and end of the pattern");
    t.body = std::move(alt);
    out.push_back(std::move(t));
  }
  return out;
}

// ---- emission ---------------------------------------------------------------------------------

struct Expr {
  std::string text;  // "" is the empty string
  bool atom = true;  // usable before a quantifier without parentheses
};

class Emitter {
 public:
  Emitter(GrammarBuilder& b, std::string hint) : b_(b), hint_(std::move(hint)) {}

  std::optional<Expr> emit(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Set: return set(n.set);
      case Node::Kind::Concat: return concat(n.kids);
      case Node::Kind::Alt: return alternation(n.kids);
      case Node::Kind::Repeat: return repeat(n);
      default: return Expr{};
    }
  }

  std::string any_char() { return b_.intern("char", *json_char_spelling(CodePointSet::all())); }

 private:
  static bool plain(const Node& n, char32_t* c) {
    if (n.kind != Node::Kind::Set || n.set.ranges().size() != 1) return false;
    const auto [lo, hi] = n.set.ranges()[0];
    if (lo != hi || lo < 0x20 || lo == '"' || lo == '\\' || lo == '/') return false;
    *c = lo;
    return true;
  }

  std::optional<Expr> set(const CodePointSet& s) {
    const auto spelled = json_char_spelling(s);
    if (!spelled) return std::nullopt;
    // Alternations get a rule of their own: patterns repeat the same classes.
    if (spelled->front() == '(') return Expr{b_.intern(hint_ + "-char", *spelled), true};
    return Expr{*spelled, true};
  }

  std::optional<Expr> concat(const std::vector<Node>& kids) {
    std::vector<std::string> parts;
    std::u32string run;
    bool atom = true;
    const auto flush = [&] {
      if (run.empty()) return;
      parts.push_back(grammar_literal(encode_utf8(run)));
      run.clear();
    };
    for (const Node& k : kids) {
      char32_t c;
      if (plain(k, &c)) {
        run += c;
        continue;
      }
      flush();
      const auto e = emit(k);
      if (!e) return std::nullopt;
      if (e->text.empty()) continue;
      parts.push_back(e->text);
      atom = e->atom;
    }
    flush();
    Expr out;
    for (size_t i = 0; i < parts.size(); i++) out.text += (i ? " " : "") + parts[i];
    out.atom = parts.size() <= 1 && atom;
    return out;
  }

  std::optional<Expr> alternation(const std::vector<Node>& kids) {
    std::vector<std::string> alts;
    std::set<std::string> seen;
    bool empty_string = false, any = false;
    for (const Node& k : kids) {
      const auto e = emit(k);
      if (!e) continue;
      any = true;
      if (e->text.empty()) empty_string = true;
      else if (seen.insert(e->text).second) alts.push_back(e->text);
    }
    if (!any) return std::nullopt;
    if (alts.empty()) return Expr{};
    if (alts.size() == 1 && !empty_string) return Expr{alts[0], false};
    std::string text = "(";
    for (size_t i = 0; i < alts.size(); i++) text += (i ? " | " : " ") + alts[i];
    text += " )";
    return Expr{text + (empty_string ? "?" : ""), true};
  }

  std::optional<Expr> repeat(const Node& n) {
    const auto e = emit(n.kids[0]);
    if (!e) return n.min == 0 ? std::optional<Expr>(Expr{}) : std::nullopt;
    if (e->text.empty() || n.max == 0) return Expr{};
    if (n.min == 1 && n.max == 1) return e;
    std::string base = e->atom ? e->text : "( " + e->text + " )";
    if (n.min == 0 && n.max == 1) return Expr{base + "?", true};
    if (n.min == 0 && n.max == kUnbounded) return Expr{base + "*", true};
    if (n.min == 1 && n.max == kUnbounded) return Expr{base + "+", true};
    if (n.max == kUnbounded) return Expr{fmt::format("{}{{{},}}", base, n.min), true};
    if (n.min == n.max) return Expr{fmt::format("{}{{{}}}", base, n.min), true};
    return Expr{fmt::format("{}{{{},{}}}", base, n.min, n.max), true};
  }

  GrammarBuilder& b_;
  std::string hint_;
};

}  // namespace

void check_regex(std::string_view pattern, const RegexLimits& limits) { (void)parse_pattern(pattern, limits); }

std::optional<std::string> regex_to_grammar(std::string_view pattern, GrammarBuilder& b, const std::string& hint,
                                            const RegexLimits& limits) {
  const std::vector<TopAlternative> alts = parse_pattern(pattern, limits);
  Emitter emitter(b, hint);
  std::vector<std::string> out;
  bool empty_string = false, any = false;
  for (const TopAlternative& t : alts) {
    const auto body = emitter.emit(t.body);
    if (!body) continue;
    any = true;
    std::vector<std::string> parts;
    if (!t.anchored_start) parts.push_back(emitter.any_char() + "*");
    if (!body->text.empty()) parts.push_back(body->text);
    // Unanchored at both ends with nothing between: one run of any characters is enough.
    if (!t.anchored_end && !(body->text.empty() && !t.anchored_start)) parts.push_back(emitter.any_char() + "*");
    std::string text;
    for (size_t i = 0; i < parts.size(); i++) text += (i ? " " : "") + parts[i];
    if (text.empty()) empty_string = true;
    else if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  if (!any) return std::nullopt;
  if (out.empty()) return std::string();
  if (out.size() == 1 && !empty_string) return out[0];
  std::string text = "(";
  for (size_t i = 0; i < out.size(); i++) text += (i ? " | " : " ") + out[i];
  return text + " )" + (empty_string ? "?" : "");
}

}  // namespace lumen
