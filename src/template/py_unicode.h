// The Unicode character facts Python's str methods rely on (isspace, isprintable, isalnum,
// upper/lower/title case mappings with their multi-character forms), so that the template
// renderer's string methods agree with the CPython that renders Hugging Face chat templates.
// The tables (py_unicode_data.cpp) are generated from CPython 3.11's unicodedata by
// scripts/gen_template_unicode.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lumen::tpl {

enum UnicodeFlag : uint16_t {
  kSpace = 1 << 0,          // str.isspace()
  kPrintable = 1 << 1,      // str.isprintable()
  kCased = 1 << 2,          // Unicode "Cased"
  kCaseIgnorable = 1 << 3,  // Unicode "Case_Ignorable"
  kAlpha = 1 << 4,
  kDecimal = 1 << 5,
  kDigit = 1 << 6,
  kNumeric = 1 << 7,
  kUpper = 1 << 8,
  kLower = 1 << 9,
  kTitle = 1 << 10,
  kWord = 1 << 11,  // regex \w: isalnum() or '_'
};

uint16_t unicode_flags(uint32_t cp);
inline bool py_isspace(uint32_t cp) { return cp < 128 ? (cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f)) : (unicode_flags(cp) & kSpace) != 0; }

// Full case mappings (Python str.lower/upper/title of one character), appended as UTF-8.
void append_lower(std::string& out, uint32_t cp);
void append_upper(std::string& out, uint32_t cp);
void append_title(std::string& out, uint32_t cp);

// Code points of valid UTF-8 (the renderer validates every string it takes in).
std::vector<uint32_t> to_code_points(std::string_view s);
size_t code_point_count(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

namespace unicode_data {
struct FlagRun {
  uint32_t first;
  uint16_t flags;
};
struct CaseRun {
  uint32_t first;
  uint32_t count;
  uint32_t stride;
  int32_t delta;
};
struct CaseSpecial {
  uint32_t cp;
  uint32_t to[3];
};
extern const FlagRun kFlagRuns[];
extern const size_t kFlagRunCount;
extern const CaseRun kLowerRuns[], kUpperRuns[], kTitleRuns[];
extern const size_t kLowerRunCount, kUpperRunCount, kTitleRunCount;
extern const CaseSpecial kLowerSpecial[], kUpperSpecial[], kTitleSpecial[];
extern const size_t kLowerSpecialCount, kUpperSpecialCount, kTitleSpecialCount;
}  // namespace unicode_data

}  // namespace lumen::tpl
