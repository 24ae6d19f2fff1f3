#include "tokenizer/unicode.h"

namespace lumen {

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Length of the valid sequence at `offset`, or 0 if the bytes there are not valid UTF-8.
// Writes the code point to `cp` when valid.
size_t valid_sequence_at(std::string_view text, size_t offset, uint32_t& cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[offset + i]); };
  const size_t n_left = text.size() - offset;
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  if (b0 < 0xC2 || b0 > 0xF4) return 0;  // continuation byte, overlong 2-byte lead, or > U+10FFFF
  const size_t n = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  if (n_left < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if (!is_continuation(byte(i))) return 0;
  }
  if (n == 2) {
    cp = (uint32_t(b0 & 0x1F) << 6) | (byte(1) & 0x3F);
    return 2;
  }
  if (n == 3) {
    cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong or surrogate
    return 3;
  }
  cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(byte(1) & 0x3F) << 12) |
       (uint32_t(byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  if (cp < 0x10000 || cp > kUnicodeMaxCodePoint) return 0;  // overlong or out of range
  return 4;
}

}  // namespace

size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

uint32_t utf8_decode_one(std::string_view text, size_t& offset) {
  uint32_t cp = 0;
  const size_t n = valid_sequence_at(text, offset, cp);
  if (n == 0) {
    offset += 1;
    return kUnicodeReplacementChar;
  }
  offset += n;
  return cp;
}

std::vector<uint32_t> utf8_decode(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) cps.push_back(utf8_decode_one(text, offset));
  return cps;
}

void utf8_append(std::string& out, uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > kUnicodeMaxCodePoint) cp = kUnicodeReplacementChar;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(uint32_t cp) {
  std::string out;
  utf8_append(out, cp);
  return out;
}

bool utf8_is_valid(std::string_view text) {
  size_t offset = 0;
  while (offset < text.size()) {
    // ASCII fast path: most tokenizer input is mostly ASCII.
    if (static_cast<uint8_t>(text[offset]) < 0x80) {
      ++offset;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = valid_sequence_at(text, offset, cp);
    if (n == 0) return false;
    offset += n;
  }
  return true;
}

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t cp = 0;
    const size_t n = valid_sequence_at(text, offset, cp);
    if (n == 0) {
      utf8_append(out, kUnicodeReplacementChar);
      offset += 1;
    } else {
      out.append(text.substr(offset, n));
      offset += n;
    }
  }
  return out;
}

}  // namespace lumen
