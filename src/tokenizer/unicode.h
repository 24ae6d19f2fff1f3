// UTF-8 helpers shared by the tokenizers: decode, encode, validate, sanitize.
//
// Invalid input is never an error here: an invalid byte decodes to U+FFFD and decoding goes
// on with the next byte, which is what llama.cpp's tokenizer does, so token ids for broken text
// agree with it. "Invalid" is strict (RFC 3629): overlong forms, surrogates (U+D800..DFFF),
// code points above U+10FFFF and truncated sequences are all invalid, one U+FFFD per byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lumen {

inline constexpr uint32_t kUnicodeReplacementChar = 0xFFFD;
inline constexpr uint32_t kUnicodeMaxCodePoint = 0x10FFFF;

// Bytes in the sequence a lead byte announces: 1 for ASCII and for stray continuation bytes
// (0x80..0xBF), 2 for 0xC0..0xDF, 3 for 0xE0..0xEF, 4 for 0xF0..0xFF. Looks at the high bits
// only (as llama.cpp's unicode_len_utf8 does); it does not validate.
size_t utf8_sequence_length(uint8_t lead);

// Decodes the code point at `offset` and advances `offset` past it. An invalid sequence yields
// U+FFFD and advances by one byte. Precondition: offset < text.size().
uint32_t utf8_decode_one(std::string_view text, size_t& offset);

// All code points of `text`, invalid bytes as U+FFFD (one each).
std::vector<uint32_t> utf8_decode(std::string_view text);

// UTF-8 of one code point; surrogates and values above U+10FFFF encode as U+FFFD.
std::string utf8_encode(uint32_t cp);
void utf8_append(std::string& out, uint32_t cp);

bool utf8_is_valid(std::string_view text);

// `text` with every invalid byte replaced by U+FFFD (valid input comes back unchanged):
// always valid UTF-8, as regex engines running in UTF mode require.
std::string utf8_sanitize(std::string_view text);

}  // namespace lumen
