// Lookups into the generated tables: binary searches over sorted runs.
#include "template/py_unicode.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace lumen::tpl {

using namespace unicode_data;

uint16_t unicode_flags(uint32_t cp) {
  const FlagRun* end = kFlagRuns + kFlagRunCount;
  const FlagRun* it = std::upper_bound(kFlagRuns, end, cp, [](uint32_t c, const FlagRun& r) { return c < r.first; });
  return it == kFlagRuns ? 0 : (it - 1)->flags;
}

namespace {

void append_mapped(std::string& out, uint32_t cp, const CaseRun* runs, size_t n_runs, const CaseSpecial* special,
                   size_t n_special) {
  const CaseSpecial* s_end = special + n_special;
  const CaseSpecial* s = std::lower_bound(special, s_end, cp, [](const CaseSpecial& x, uint32_t c) { return x.cp < c; });
  if (s != s_end && s->cp == cp) {
    for (uint32_t to : s->to)
      if (to) append_utf8(out, to);
    return;
  }
  const CaseRun* r_end = runs + n_runs;
  const CaseRun* r = std::upper_bound(runs, r_end, cp, [](uint32_t c, const CaseRun& x) { return c < x.first; });
  if (r != runs) {
    --r;
    const uint32_t off = cp - r->first;
    if (off % r->stride == 0 && off / r->stride < r->count) {
      append_utf8(out, static_cast<uint32_t>(static_cast<int64_t>(cp) + r->delta));
      return;
    }
  }
  append_utf8(out, cp);
}

}  // namespace

void append_lower(std::string& out, uint32_t cp) {
  if (cp < 128) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  append_mapped(out, cp, kLowerRuns, kLowerRunCount, kLowerSpecial, kLowerSpecialCount);
}

void append_upper(std::string& out, uint32_t cp) {
  if (cp < 128) {
    out += static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp);
    return;
  }
  append_mapped(out, cp, kUpperRuns, kUpperRunCount, kUpperSpecial, kUpperSpecialCount);
}

void append_title(std::string& out, uint32_t cp) {
  if (cp < 128) return append_upper(out, cp);
  append_mapped(out, cp, kTitleRuns, kTitleRunCount, kTitleSpecial, kTitleSpecialCount);
}

std::vector<uint32_t> to_code_points(std::string_view s) { return utf8_decode(s); }

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) { utf8_append(out, cp); }

}  // namespace lumen::tpl
