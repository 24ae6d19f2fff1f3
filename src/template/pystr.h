// Python str algorithms over UTF-8 (indices count code points, as Python's do), json.dumps,
// and printf-style / str.format() formatting: the pieces of Python the string methods and
// filters of chat templates run on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "template/value.h"

namespace lumen::tpl {

// Byte offsets of a UTF-8 string's code points (identity for ASCII).
class CpView {
 public:
  explicit CpView(std::string_view s);
  size_t size() const { return ascii_ ? s_.size() : offs_.size() - 1; }
  size_t byte(size_t i) const { return ascii_ ? i : offs_[i]; }
  std::string_view sub(size_t from, size_t to) const { return s_.substr(byte(from), byte(to) - byte(from)); }
  uint32_t at(size_t i) const;

 private:
  std::string_view s_;
  bool ascii_ = true;
  std::vector<size_t> offs_;
};

// Python's slice.indices(len): normalised start, stop, step (null = omitted). step != 0.
void slice_indices(int64_t len, const int64_t* start, const int64_t* stop, const int64_t* step, int64_t& b,
                   int64_t& e, int64_t& st);
// start/end arguments of str.find() & co: clamped to [0, len] like a slice.
void clamp_range(int64_t len, const int64_t* start, const int64_t* end, int64_t& b, int64_t& e);
// CPython's ADJUST_INDICES for str.find() & co: negatives count from the end, end is capped at
// len, but a start past the end stays there (so find() answers -1).
void adjust_indices(int64_t len, int64_t& start, int64_t& end);

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()
std::string py_swapcase(std::string_view s);
std::string jinja_title(std::string_view s);    // jinja2's title filter
std::string py_replace(std::string_view s, std::string_view old, std::string_view rep, int64_t count);
int64_t py_find(std::string_view s, std::string_view sub, int64_t b, int64_t e, bool reverse);  // code points
int64_t py_count(std::string_view s, std::string_view sub, int64_t b, int64_t e);
// The predicates str.isX(): true iff non-empty and every code point has `flags` (any of them).
bool py_all_chars(std::string_view s, uint16_t flags);
bool py_isupper(std::string_view s);
bool py_islower(std::string_view s);
bool py_istitle(std::string_view s);
std::string py_pad(std::string_view s, int64_t width, uint32_t fill, int align);  // align: <0 ljust, 0 center, >0 rjust
std::string html_escape(std::string_view s);  // markupsafe.escape

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonOptions& o);  // Python json.dumps

std::string percent_format(std::string_view fmt, const Value& args);  // fmt % args
// str.format(*args, **kwargs), fields resolved with jinja2's sandboxed getattr/getitem.
std::string str_format(std::string_view fmt, const CallArgs& args);

}  // namespace lumen::tpl
