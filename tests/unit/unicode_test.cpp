#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/unicode.h"

namespace lumen {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

TEST(Unicode, SequenceLengthFromLeadByte) {
  EXPECT_EQ(utf8_sequence_length(0x00), 1u);
  EXPECT_EQ(utf8_sequence_length('a'), 1u);
  EXPECT_EQ(utf8_sequence_length(0x7F), 1u);
  EXPECT_EQ(utf8_sequence_length(0x80), 1u);  // stray continuation byte
  EXPECT_EQ(utf8_sequence_length(0xBF), 1u);
  EXPECT_EQ(utf8_sequence_length(0xC3), 2u);
  EXPECT_EQ(utf8_sequence_length(0xE4), 3u);
  EXPECT_EQ(utf8_sequence_length(0xF0), 4u);
  EXPECT_EQ(utf8_sequence_length(0xFF), 4u);
}

TEST(Unicode, EncodeKnownCodePoints) {
  EXPECT_EQ(utf8_encode('A'), "A");
  EXPECT_EQ(utf8_encode(0xE9), "\xC3\xA9");                 // é
  EXPECT_EQ(utf8_encode(0x4E2D), "\xE4\xB8\xAD");           // 中
  EXPECT_EQ(utf8_encode(0x1F999), "\xF0\x9F\xA6\x99");      // 🦙
  EXPECT_EQ(utf8_encode(0x10FFFF), "\xF4\x8F\xBF\xBF");
  EXPECT_EQ(utf8_encode(0xD800), kReplacement);             // surrogates are not characters
  EXPECT_EQ(utf8_encode(0x110000), kReplacement);
  std::string s = "x";
  utf8_append(s, 0x20AC);
  EXPECT_EQ(s, "x\xE2\x82\xAC");
}

TEST(Unicode, EveryCodePointRoundTrips) {
  std::string all;
  std::vector<uint32_t> expected;
  for (uint32_t cp = 0; cp <= kUnicodeMaxCodePoint; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    utf8_append(all, cp);
    expected.push_back(cp);
  }
  EXPECT_TRUE(utf8_is_valid(all));
  EXPECT_EQ(utf8_decode(all), expected);
  EXPECT_EQ(utf8_sanitize(all), all);
}

TEST(Unicode, InvalidBytesDecodeToOneReplacementEach) {
  using V = std::vector<uint32_t>;
  EXPECT_EQ(utf8_decode(""), V{});
  EXPECT_EQ(utf8_decode("a\x80z"), (V{'a', 0xFFFD, 'z'}));
  EXPECT_EQ(utf8_decode("\xE4\xB8"), (V{0xFFFD, 0xFFFD}));             // truncated
  EXPECT_EQ(utf8_decode("\xE4\xB8z"), (V{0xFFFD, 0xFFFD, 'z'}));
  EXPECT_EQ(utf8_decode("\xC0\x80"), (V{0xFFFD, 0xFFFD}));             // overlong NUL
  EXPECT_EQ(utf8_decode("\xE0\x80\xAF"), (V{0xFFFD, 0xFFFD, 0xFFFD})); // overlong '/'
  EXPECT_EQ(utf8_decode("\xED\xA0\x80"), (V{0xFFFD, 0xFFFD, 0xFFFD})); // surrogate D800
  EXPECT_EQ(utf8_decode("\xF4\x90\x80\x80"), (V{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));  // > 10FFFF
  EXPECT_EQ(utf8_decode("\xFF\xFE"), (V{0xFFFD, 0xFFFD}));
  EXPECT_EQ(utf8_decode("\xF0\x9F\xA6"), (V{0xFFFD, 0xFFFD, 0xFFFD}));
  // A valid character right after a broken one is kept.
  EXPECT_EQ(utf8_decode("\xE4\xE4\xB8\xAD"), (V{0xFFFD, 0x4E2D}));
}

TEST(Unicode, DecodeOneAdvances) {
  const std::string text = "a\xC3\xA9\xFF\xF0\x9F\xA6\x99";
  size_t offset = 0;
  EXPECT_EQ(utf8_decode_one(text, offset), 'a');
  EXPECT_EQ(offset, 1u);
  EXPECT_EQ(utf8_decode_one(text, offset), 0xE9u);
  EXPECT_EQ(offset, 3u);
  EXPECT_EQ(utf8_decode_one(text, offset), 0xFFFDu);
  EXPECT_EQ(offset, 4u);
  EXPECT_EQ(utf8_decode_one(text, offset), 0x1F999u);
  EXPECT_EQ(offset, 8u);
}

TEST(Unicode, ValidityAndSanitize) {
  EXPECT_TRUE(utf8_is_valid(""));
  EXPECT_TRUE(utf8_is_valid("plain ascii"));
  EXPECT_TRUE(utf8_is_valid("\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\xA6\x99"));
  EXPECT_FALSE(utf8_is_valid("\x80"));
  EXPECT_FALSE(utf8_is_valid("abc\xE4\xB8"));
  EXPECT_FALSE(utf8_is_valid("\xED\xBF\xBF"));
  EXPECT_EQ(utf8_sanitize("a\xFF" "b"), "a" + kReplacement + "b");
  EXPECT_EQ(utf8_sanitize("\xE4\xB8"), kReplacement + kReplacement);
  EXPECT_EQ(utf8_sanitize("ok \xC3\xA9"), "ok \xC3\xA9");
  // Sanitized text is always valid, whatever the bytes.
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  EXPECT_TRUE(utf8_is_valid(utf8_sanitize(every_byte)));
  EXPECT_EQ(utf8_decode(utf8_sanitize(every_byte)), utf8_decode(every_byte));
}

}  // namespace
}  // namespace lumen
