#include "tokenizer/detokenizer.h"

#include "tokenizer/tokenizer.h"

namespace lumen {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class Seq { Complete, Incomplete, Invalid };

// Classifies the UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF); `len` is its length when complete.
Seq classify(std::string_view s, size_t i, size_t& len) {
  const auto lead = static_cast<uint8_t>(s[i]);
  if (lead < 0x80) {
    len = 1;
    return Seq::Complete;
  }
  if (lead >= 0xC2 && lead <= 0xDF) len = 2;
  else if (lead >= 0xE0 && lead <= 0xEF) len = 3;
  else if (lead >= 0xF0 && lead <= 0xF4) len = 4;
  else return Seq::Invalid;
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return Seq::Incomplete;
    const auto b = static_cast<uint8_t>(s[i + k]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {
      if (lead == 0xE0) lo = 0xA0;       // overlong
      else if (lead == 0xED) hi = 0x9F;  // surrogates
      else if (lead == 0xF0) lo = 0x90;  // overlong
      else if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
    }
    if (b < lo || b > hi) return Seq::Invalid;
  }
  return Seq::Complete;
}

}  // namespace

std::string IncrementalDetokenizer::push(int32_t id) { return push_bytes(tokenizer_.token_to_piece(id, special_)); }

std::string IncrementalDetokenizer::push_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 0;
    const Seq seq = classify(pending_, i, len);
    if (seq == Seq::Incomplete) break;  // keep the tail until more bytes arrive
    if (seq == Seq::Invalid) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(pending_, i, len);
    i += len;
  }
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  for (size_t i = 0; i < pending_.size(); ++i) out += kReplacement;
  pending_.clear();
  return out;
}

}  // namespace lumen
