// The GBNF-style text form (grammar/grammar.h) into a ParsedGrammar. A recursive-descent parser
// over bytes of UTF-8 text; literals and classes decode UTF-8 into code points. Every error
// names its line and column; nesting is bounded, so no input can overflow the stack.
#include <algorithm>
#include <unordered_map>

#include "grammar/grammar_ast.h"

namespace lumen::grammar_detail {

namespace {

constexpr uint32_t kMaxCode = 0x10FFFF;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : s_(text), limits_(limits) {}

  ParsedGrammar run() {
    skip_space();
    if (at_end()) error("the grammar is empty (it needs at least `root ::= ...`)");
    while (!at_end()) {
      const int line = line_, col = col_;
      const std::string name = parse_name();
      skip_space();
      if (!consume("::=")) error("expected '::=' after the rule name '{}'", name);
      const int32_t id = rule_id(name, line, col);
      ParsedRule& r = out_.rules[static_cast<size_t>(id)];
      if (r.body) error_at(line, col, "rule '{}' is defined twice (first at line {})", name, r.line);
      r.line = line;
      r.col = col;
      skip_space();
      auto body = parse_alternatives(0);
      out_.rules[static_cast<size_t>(id)].body = std::move(body);
      skip_space();
      if (peek() == ')') error("unbalanced ')'");
    }
    for (const ParsedRule& r : out_.rules)
      if (!r.body) error_at(r.line, r.col, "rule '{}' is used but never defined", r.name);
    return std::move(out_);
  }

 private:
  template <class... Args>
  [[noreturn]] void error_at(int line, int col, fmt::format_string<Args...> f, Args&&... args) {
    throw GrammarError(fmt::format("grammar: line {}, column {}: {}", line, col,
                                   fmt::format(f, std::forward<Args>(args)...)));
  }
  template <class... Args>
  [[noreturn]] void error(fmt::format_string<Args...> f, Args&&... args) {
    error_at(line_, col_, f, std::forward<Args>(args)...);
  }

  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  void advance() {
    if (s_[i_] == '\n') {
      line_++;
      col_ = 1;
    } else if ((static_cast<uint8_t>(s_[i_]) & 0xC0) != 0x80) {
      col_++;  // columns count characters, not continuation bytes
    }
    i_++;
  }
  bool consume(std::string_view tok) {
    if (s_.substr(i_, tok.size()) != tok) return false;
    for (size_t k = 0; k < tok.size(); k++) advance();
    return true;
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') advance();
      else if (c == '#')
        while (!at_end() && peek() != '\n') advance();
      else break;
    }
  }

  std::string parse_name() {
    const size_t b = i_;
    while (!at_end() && is_name_char(peek())) advance();
    if (i_ == b) error("expected a rule name, found {}", describe_here());
    return std::string(s_.substr(b, i_ - b));
  }

  std::string describe_here() const {
    if (at_end()) return "the end of the grammar";
    const char c = peek();
    if (static_cast<uint8_t>(c) < 0x20) return fmt::format("byte 0x{:02x}", static_cast<uint8_t>(c));
    return fmt::format("'{}'", c);
  }

  // Is the text at the cursor the start of the next rule (`name ::=`)?
  bool at_rule_start() const {
    size_t k = i_;
    while (k < s_.size() && is_name_char(s_[k])) k++;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\n' || s_[k] == '\r')) k++;
    return s_.substr(k, 3) == "::=";
  }

  int32_t rule_id(const std::string& name, int line, int col) {
    auto [it, fresh] = ids_.try_emplace(name, static_cast<int32_t>(out_.rules.size()));
    if (fresh) {
      ParsedRule r;
      r.name = name;
      r.line = line;
      r.col = col;
      out_.rules.push_back(std::move(r));
    }
    return it->second;
  }

  std::unique_ptr<Node> make(Node::Kind k) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line_;
    n->col = col_;
    return n;
  }

  std::unique_ptr<Node> parse_alternatives(int depth) {
    if (depth > limits_.max_nesting) error("parentheses nest deeper than {}", limits_.max_nesting);
    auto alt = make(Node::Kind::Alt);
    alt->children.push_back(parse_sequence(depth));
    while (peek() == '|') {
      advance();
      skip_space();
      alt->children.push_back(parse_sequence(depth));
    }
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  std::unique_ptr<Node> parse_sequence(int depth) {
    auto seq = make(Node::Kind::Seq);
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      auto item = parse_item(depth);
      item = parse_postfix(std::move(item));
      seq->children.push_back(std::move(item));
      skip_space();
    }
    if (seq->children.size() == 1) return std::move(seq->children[0]);
    return seq;  // empty: the empty string
  }

  std::unique_ptr<Node> parse_item(int depth) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      auto n = make(Node::Kind::Chars);
      advance();
      n->chars = complement_ranges({});
      return n;
    }
    if (c == '(') {
      const int line = line_, col = col_;
      advance();
      skip_space();
      auto inner = parse_alternatives(depth + 1);
      skip_space();
      if (peek() != ')') error_at(line, col, "this '(' is never closed");
      advance();
      return inner;
    }
    if (is_name_char(c)) {
      auto n = make(Node::Kind::Ref);
      const int line = line_, col = col_;
      n->rule = rule_id(parse_name(), line, col);
      return n;
    }
    if (c == ')') error("unbalanced ')'");
    error("unexpected {}", describe_here());
  }

  std::unique_ptr<Node> parse_postfix(std::unique_ptr<Node> item) {
    for (int n_ops = 0;; n_ops++) {
      if (n_ops > 16) error("more than 16 repetition operators on one item");
      const char c = peek();
      int64_t lo = 0, hi = -1;
      if (c == '*') {
        advance();
      } else if (c == '+') {
        advance();
        lo = 1;
      } else if (c == '?') {
        advance();
        hi = 1;
      } else if (c == '{') {
        advance();
        skip_space();
        lo = parse_count();
        skip_space();
        if (peek() == ',') {
          advance();
          skip_space();
          hi = peek() == '}' ? -1 : parse_count();
          skip_space();
        } else {
          hi = lo;
        }
        if (peek() != '}') error("expected '}}' to close the repetition");
        advance();
        if (hi >= 0 && hi < lo) error("repetition {{{},{}}} has its maximum below its minimum", lo, hi);
      } else {
        return item;
      }
      auto rep = make(Node::Kind::Repeat);
      rep->min = lo;
      rep->max = hi;
      rep->children.push_back(std::move(item));
      item = std::move(rep);
    }
  }

  int64_t parse_count() {
    if (!(peek() >= '0' && peek() <= '9')) error("expected a number in the repetition");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > limits_.max_repeat) error("repetition count above the limit of {}", limits_.max_repeat);
      advance();
    }
    return v;
  }

  // One character of a literal or class (after any escape), as a code point.
  uint32_t parse_char() {
    if (at_end()) error("unterminated literal or class");
    const auto b0 = static_cast<uint8_t>(peek());
    if (b0 == '\\') {
      advance();
      if (at_end()) error("unterminated escape");
      const char e = peek();
      advance();
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': return static_cast<uint8_t>(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: error("unknown escape '\\{}'", e);
      }
    }
    if (b0 < 0x80) {
      advance();
      return b0;
    }
    // A UTF-8 sequence of the grammar text itself.
    int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
    if (len == 0 || b0 > 0xF4) error("invalid UTF-8 in the grammar text");
    uint32_t cp = b0 & (0x3F >> (len - 1));
    advance();
    for (int k = 1; k < len; k++) {
      const auto b = static_cast<uint8_t>(peek());
      if (at_end() || (b & 0xC0) != 0x80) error("invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (b & 0x3F);
      advance();
    }
    const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > kMaxCode || (cp >= 0xD800 && cp <= 0xDFFF))
      error("invalid UTF-8 in the grammar text");
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) error("expected {} hex digits in the escape", digits);
      v = v * 16 + static_cast<uint32_t>(d);
      advance();
    }
    if (v > kMaxCode) error("code point U+{:X} is above U+10FFFF", v);
    if (v >= 0xD800 && v <= 0xDFFF) error("code point U+{:X} is a surrogate, not a character", v);
    return v;
  }

  std::unique_ptr<Node> parse_literal() {
    const int line = line_, col = col_;
    advance();  // "
    auto seq = make(Node::Kind::Seq);
    seq->line = line;
    seq->col = col;
    while (peek() != '"') {
      if (at_end()) error_at(line, col, "this literal is never closed");
      if (peek() == '\n') error_at(line, col, "a literal may not span lines (write \\n)");
      auto ch = make(Node::Kind::Chars);
      const uint32_t cp = parse_char();
      ch->chars = {{cp, cp}};
      seq->children.push_back(std::move(ch));
    }
    advance();
    if (seq->children.size() == 1) return std::move(seq->children[0]);
    return seq;
  }

  std::unique_ptr<Node> parse_class() {
    const int line = line_, col = col_;
    advance();  // [
    auto n = make(Node::Kind::Chars);
    n->line = line;
    n->col = col;
    bool negate = false;
    if (peek() == '^') {
      advance();
      negate = true;
    }
    CodeRanges r;
    while (peek() != ']') {
      if (at_end()) error_at(line, col, "this '[' is never closed");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < s_.size()) {
        advance();
        hi = parse_char();
        if (hi < lo) error("class range U+{:X}-U+{:X} is reversed", lo, hi);
      }
      r.emplace_back(lo, hi);
    }
    advance();
    r = normalize_ranges(std::move(r));
    n->chars = negate ? complement_ranges(r) : std::move(r);
    if (n->chars.empty()) error_at(line, col, "this class matches no character");
    return n;
  }

  std::string_view s_;
  const GrammarLimits& limits_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
  ParsedGrammar out_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace

CodeRanges normalize_ranges(CodeRanges r) {
  CodeRanges split;
  for (auto [lo, hi] : r) {
    // Surrogates are not characters: cut them out of any range that spans them.
    if (lo < 0xD800 && hi > 0xDFFF) {
      split.emplace_back(lo, 0xD7FF);
      split.emplace_back(0xE000, hi);
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      split.emplace_back(0xE000, hi);
    } else if (hi >= 0xD800 && hi <= 0xDFFF) {
      split.emplace_back(lo, 0xD7FF);
    } else {
      split.emplace_back(lo, hi);
    }
  }
  std::sort(split.begin(), split.end());
  CodeRanges out;
  for (auto [lo, hi] : split) {
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.emplace_back(lo, hi);
  }
  return out;
}

CodeRanges complement_ranges(const CodeRanges& r) {
  const CodeRanges n = normalize_ranges(r);
  CodeRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : n) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCode) out.emplace_back(next, kMaxCode);
  return normalize_ranges(std::move(out));
}

ParsedGrammar parse_grammar(std::string_view text, const GrammarLimits& limits) {
  if (text.size() > limits.max_text_bytes)
    throw GrammarError(fmt::format("grammar: the text is {} bytes, above the limit of {}", text.size(),
                                   limits.max_text_bytes));
  return Parser(text, limits).run();
}

}  // namespace lumen::grammar_detail
