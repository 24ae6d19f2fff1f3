// The scanner mirrors jinja2/lexer.py's state machine (root, comment, raw, block, variable).
// Comments cite the regular expressions each piece stands for, because the exact whitespace a
// chat template produces depends on every one of them.
#include "template/lexer.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "template/py_unicode.h"
#include "tokenizer/unicode.h"

namespace lumen::tpl {

const char* token_name(Tok t) {
  switch (t) {
    case Tok::Data: return "template data";
    case Tok::VarBegin: return "begin of print statement";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::Name: return "name";
    case Tok::String: return "string";
    case Tok::Integer: return "integer";
    case Tok::Float: return "float";
    case Tok::Op: return "operator";
    case Tok::Eof: return "end of template";
  }
  return "token";
}

namespace {

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    // Only \r\n, \r and \n are line breaks, all become \n; one final newline is dropped
    // (keep_trailing_newline=False).
    src_.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root();
    Token eof;
    eof.type = Tok::Eof;
    eof.line = line_;
    out_.push_back(eof);
    return std::move(out_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
  std::vector<char> balance_;

  [[noreturn]] void error(const std::string& msg) const { fail("template line {}: {}", line_, msg); }

  bool at(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // Python's \s (Unicode whitespace) at p: its length in bytes, 0 if none.
  size_t space_at(size_t p) const {
    if (p >= src_.size()) return 0;
    const uint8_t c = static_cast<uint8_t>(src_[p]);
    if (c < 0x80) return py_isspace(c) ? 1 : 0;
    size_t q = p;
    const uint32_t cp = utf8_decode_one(src_, q);
    return py_isspace(cp) ? q - p : 0;
  }
  size_t skip_spaces(size_t p) const {
    while (size_t n = space_at(p)) p += n;
    return p;
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += src_[i] == '\n';
  }

  void emit(Tok type, std::string text, int line) {
    Token t;
    t.type = type;
    t.line = line;
    t.text = std::move(text);
    out_.push_back(std::move(t));
  }

  // Python str.rstrip(): trailing Unicode whitespace.
  static std::string rstrip(std::string_view s) {
    size_t end = s.size();
    while (end > 0) {
      size_t start = end - 1;
      while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
      size_t q = start;
      if (!py_isspace(utf8_decode_one(s, q))) break;
      end = start;
    }
    return std::string(s.substr(0, end));
  }

  // OptionalLStrip: the text before a tag with sign `sign`; `is_variable`: a {{ tag.
  std::string strip_text(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') return rstrip(text);
    if (sign != '+' && !is_variable) {
      // lstrip_blocks: only whitespace between the last newline (or the start of a line) and
      // the tag: drop it.
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        std::string_view tail = text.substr(l_pos);
        bool all_space = true;
        for (size_t i = 0; i < tail.size() && all_space;) {
          all_space = py_isspace(utf8_decode_one(tail, i));
        }
        if (all_space) return std::string(text.substr(0, l_pos));
      }
    }
    return std::string(text);
  }

  // {% raw %}: "{%" sign \s* "raw" \s* ("-%}" \s* | "%}"); returns the end, or npos.
  size_t match_raw_begin(size_t p) const {
    size_t q = p + 2;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
    q = skip_spaces(q);
    if (!at(q, "raw")) return std::string::npos;
    q = skip_spaces(q + 3);
    if (at(q, "-%}")) return skip_spaces(q + 3);
    if (at(q, "%}")) return q + 2;
    return std::string::npos;
  }

  void root() {
    size_t p = pos_;
    for (;;) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) {
        p = std::string::npos;
        break;
      }
      const char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++p;
    }
    if (p == std::string::npos) {  // the rest is data
      emit(Tok::Data, src_.substr(pos_), line_);
      count_lines(pos_, src_.size());
      pos_ = src_.size();
      return;
    }
    const char kind = src_[p + 1];
    char sign = 0;
    if (p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+')) sign = src_[p + 2];
    size_t raw_end = kind == '%' ? match_raw_begin(p) : std::string::npos;
    const std::string text = strip_text(std::string_view(src_).substr(pos_, p - pos_), sign, kind == '{');
    if (!text.empty()) emit(Tok::Data, text, line_);
    count_lines(pos_, p);
    if (raw_end != std::string::npos) {
      count_lines(p, raw_end);
      line_starting_ = src_[raw_end - 1] == '\n';
      pos_ = raw_end;
      raw_body();
      return;
    }
    size_t q = p + 2 + (sign ? 1 : 0);
    line_starting_ = false;  // the match ends with the tag's opening characters
    pos_ = q;
    if (kind == '#') {
      comment();
    } else {
      const int line = line_;
      emit(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line);
      tag(kind == '%');
    }
  }

  // (.*?)((?:\+#}|\-#}\s*|#}\n?))
  void comment() {
    for (size_t p = pos_; p < src_.size(); ++p) {
      size_t end = std::string::npos;
      if (at(p, "+#}")) end = p + 3;
      else if (at(p, "-#}")) end = skip_spaces(p + 3);
      else if (at(p, "#}")) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n');
      if (end == std::string::npos) continue;
      count_lines(pos_, end);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    error("Missing end of comment tag");
  }

  // (.*?)((?:\{%(\-|\+|))\s*endraw\s*(?:\+%}|\-%}\s*|%}\n?)) with OptionalLStrip
  void raw_body() {
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_spaces(q);
      if (!at(q, "endraw")) continue;
      q = skip_spaces(q + 6);
      size_t end = std::string::npos;
      if (at(q, "+%}")) end = q + 3;
      else if (at(q, "-%}")) end = skip_spaces(q + 3);
      else if (at(q, "%}")) end = q + 2 + (q + 2 < src_.size() && src_[q + 2] == '\n');
      if (end == std::string::npos) continue;
      const std::string text = strip_text(std::string_view(src_).substr(pos_, p - pos_), sign, false);
      if (!text.empty()) emit(Tok::Data, text, line_);
      count_lines(pos_, end);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    error("Missing end of raw directive");
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // (\d+_)*\d+ at p: end or npos
  size_t digits(size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    for (;;) {
      while (p < src_.size() && is_digit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  // float_re: (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+)
  size_t match_float(size_t p) const {
    if (p > 0 && src_[p - 1] == '.') return std::string::npos;
    const size_t int_end = digits(p);
    if (int_end == std::string::npos) return std::string::npos;
    auto exponent = [&](size_t q) -> size_t {
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        ++q;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        return digits(q);
      }
      return std::string::npos;
    };
    size_t frac_end = std::string::npos;
    if (int_end < src_.size() && src_[int_end] == '.') frac_end = digits(int_end + 1);
    if (frac_end != std::string::npos) {
      if (size_t e = exponent(frac_end); e != std::string::npos) return e;
    }
    if (size_t e = exponent(int_end); e != std::string::npos) return e;
    return frac_end;
  }

  // integer_re: 0b(_?[01])+ | 0o(_?[0-7])+ | 0x(_?[0-9a-f])+ | [1-9](_?\d)* | 0(_?0)*
  size_t match_integer(size_t p, int& base) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    auto run = [&](size_t q, auto ok) -> size_t {
      size_t end = std::string::npos;
      for (;;) {
        size_t r = q;
        if (r < src_.size() && src_[r] == '_') ++r;
        if (r < src_.size() && ok(src_[r])) {
          q = end = r + 1;
        } else {
          return end;
        }
      }
    };
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(src_[p + 1] | 0x20);
      size_t e = std::string::npos;
      if (x == 'b') e = run(p + 2, [](char c) { return c == '0' || c == '1'; }), base = 2;
      else if (x == 'o') e = run(p + 2, [](char c) { return c >= '0' && c <= '7'; }), base = 8;
      else if (x == 'x')
        e = run(p + 2, [](char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }), base = 16;
      if (e != std::string::npos) return e;
    }
    base = 10;
    if (src_[p] == '0') {
      size_t e = run(p + 1, [](char c) { return c == '0'; });
      return e == std::string::npos ? p + 1 : e;
    }
    size_t e = run(p + 1, is_digit);
    return e == std::string::npos ? p + 1 : e;
  }

  size_t match_name(size_t p) const {
    size_t q = p;
    while (q < src_.size()) {
      const uint8_t c = static_cast<uint8_t>(src_[q]);
      if (c < 0x80) {
        if (!(std::isalnum(c) || c == '_')) break;
        ++q;
      } else {
        size_t r = q;
        const uint32_t cp = utf8_decode_one(src_, r);
        if (!(unicode_flags(cp) & kWord)) break;
        q = r;
      }
    }
    return q == p ? std::string::npos : q;
  }

  void append_hex_escape(std::string& out, const std::string& body, size_t& i, int n, char which) const {
    if (i + n > body.size()) error(fmt::format("truncated \\{}{} escape", which, std::string(n, 'X')));
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char c = body[i + k];
      int d;
      if (is_digit(c)) d = c - '0';
      else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
      else error(fmt::format("truncated \\{}{} escape", which, std::string(n, 'X')));
      v = v * 16 + d;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error("illegal Unicode character");
    i += n;
    append_utf8(out, v);
  }

  // The literal's body decoded as jinja2 does: .encode("ascii", "backslashreplace")
  // .decode("unicode-escape"), i.e. Python's escapes, unknown ones kept verbatim.
  std::string unescape(const std::string& body) const {
    std::string out;
    for (size_t i = 0; i < body.size();) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out += body[i++];
        continue;
      }
      const char c = body[i + 1];
      i += 2;
      switch (c) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': append_hex_escape(out, body, i, 2, 'x'); break;
        case 'u': append_hex_escape(out, body, i, 4, 'u'); break;
        case 'U': append_hex_escape(out, body, i, 8, 'U'); break;
        case 'N': error("\\N{...} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            uint32_t v = c - '0';
            for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) v = v * 8 + (body[i++] - '0');
            append_utf8(out, v);
          } else if (static_cast<uint8_t>(c) >= 0x80) {
            // backslashreplace turned the character into \xNN / \uNNNN / \UNNNNNNNN, whose
            // backslash the preceding one escapes: the escape's text comes out literally.
            size_t j = i - 1;
            const uint32_t cp = utf8_decode_one(body, j);
            i = j;
            out += '\\';
            out += cp <= 0xff ? fmt::format("x{:02x}", cp) : cp <= 0xffff ? fmt::format("u{:04x}", cp) : fmt::format("U{:08x}", cp);
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  // Tokens inside {{ }} / {% %} until the closing delimiter (only when brackets balance).
  void tag(bool block) {
    while (pos_ < src_.size()) {
      const size_t p = pos_;
      if (balance_.empty()) {
        size_t end = std::string::npos;
        if (block) {
          if (at(p, "+%}")) end = p + 3;
          else if (at(p, "-%}")) end = skip_spaces(p + 3);
          else if (at(p, "%}")) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n');
        } else {
          if (at(p, "-}}")) end = skip_spaces(p + 3);
          else if (at(p, "}}")) end = p + 2;
        }
        if (end != std::string::npos) {
          emit(block ? Tok::BlockEnd : Tok::VarEnd, "", line_);
          count_lines(p, end);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (size_t n = space_at(p)) {
        size_t q = skip_spaces(p + n);
        count_lines(p, q);
        pos_ = q;
        continue;
      }
      if (size_t e = match_float(p); e != std::string::npos) {
        std::string text;
        for (size_t i = p; i < e; ++i)
          if (src_[i] != '_') text += src_[i];
        Token t;
        t.type = Tok::Float;
        t.line = line_;
        t.fval = std::strtod(text.c_str(), nullptr);
        t.text = text;
        out_.push_back(std::move(t));
        pos_ = e;
        continue;
      }
      int base = 10;
      if (size_t e = match_integer(p, base); e != std::string::npos) {
        std::string text;
        for (size_t i = p + (base == 10 ? 0 : 2); i < e; ++i)
          if (src_[i] != '_') text += src_[i];
        errno = 0;
        char* endp = nullptr;
        const unsigned long long v = std::strtoull(text.c_str(), &endp, base);
        if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
          error("integer literal out of the 64-bit range");
        Token t;
        t.type = Tok::Integer;
        t.line = line_;
        t.ival = static_cast<int64_t>(v);
        t.text = src_.substr(p, e - p);
        out_.push_back(std::move(t));
        pos_ = e;
        continue;
      }
      if (size_t e = match_name(p); e != std::string::npos) {
        emit(Tok::Name, src_.substr(p, e - p), line_);
        pos_ = e;
        continue;
      }
      const char c = src_[p];
      if (c == '\'' || c == '"') {
        size_t q = p + 1;
        while (q < src_.size() && src_[q] != c) q += src_[q] == '\\' ? 2 : 1;
        if (q < src_.size()) {
          const int line = line_;
          std::string value = unescape(src_.substr(p + 1, q - p - 1));
          emit(Tok::String, std::move(value), line);
          count_lines(p, q + 1);
          pos_ = q + 1;
          continue;
        }
        // unterminated: falls through to "unexpected char"
      }
      static const char* const two[] = {"**", "//", "==", "!=", ">=", "<="};
      std::string op;
      for (const char* t : two)
        if (at(p, t)) op = t;
      if (op.empty() && std::string_view("+-/*%~[](){}><=.:|,;").find(c) != std::string_view::npos) op = std::string(1, c);
      if (op.empty()) {
        size_t q = p;
        const uint32_t cp = utf8_decode_one(src_, q);
        std::string shown;
        append_utf8(shown, cp);
        error(fmt::format("unexpected char '{}' at {}", shown, p));
      }
      if (op == "{" || op == "(" || op == "[") {
        if (balance_.size() >= 1024) error("brackets nested too deeply");
        balance_.push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
      } else if (op == "}" || op == ")" || op == "]") {
        if (balance_.empty()) error(fmt::format("unexpected '{}'", op));
        const char expected = balance_.back();
        balance_.pop_back();
        if (expected != op[0]) error(fmt::format("unexpected '{}', expected '{}'", op, expected));
      }
      emit(Tok::Op, op, line_);
      pos_ = p + op.size();
    }
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!utf8_is_valid(source)) fail("template line 1: the template is not valid UTF-8");
  return Lexer(source).run();
}

}  // namespace lumen::tpl
