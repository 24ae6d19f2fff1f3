// IncrementalDetokenizer: streaming text out of token ids never emits a broken UTF-8 sequence,
// holds incomplete characters back until they complete, and loses no bytes. Uses the 512-token
// stories260K vocabulary (byte-fallback tokens <0x00>..<0xFF> are ids 3..258).
#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace lumen {
namespace {

class DetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "models/stories260K.gguf not found";
    static std::unique_ptr<Tokenizer> cached =
        Tokenizer::from_gguf(*GgufFile::open(test::shared_path("models/stories260K.gguf")));
    tok = cached.get();
  }
  int32_t byte(uint8_t b) const { return tok->vocab().byte_to_token(b); }
  const Tokenizer* tok = nullptr;
};

TEST_F(DetokenizerTest, HoldsBackIncompleteCharacters) {
  // "日" is E6 97 A5: three byte tokens.
  IncrementalDetokenizer d(*tok);
  EXPECT_EQ(d.push(byte(0xE6)), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(byte(0x97)), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.push(byte(0xA5)), "\xE6\x97\xA5");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.flush(), "");
}

TEST_F(DetokenizerTest, StreamsAnEncodedTextBackExactly) {
  const std::string text = "café naïve 日本語 🙂 done";
  IncrementalDetokenizer d(*tok);
  std::string out;
  for (int32_t id : tok->encode(text, true, true)) {
    const std::string part = d.push(id);
    EXPECT_TRUE(utf8_is_valid(part)) << "token " << id;
    out += part;
  }
  out += d.flush();
  EXPECT_EQ(out, " " + text);  // SPM pieces keep the space prefix; BOS renders as nothing
}

TEST_F(DetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  IncrementalDetokenizer d(*tok);
  EXPECT_EQ(d.push(byte(0xFF)), "\xEF\xBF\xBD");  // can never start a character
  EXPECT_EQ(d.push(byte(0xE6)), "");
  // 'a' cannot continue E6: E6 becomes U+FFFD, then the piece follows.
  EXPECT_EQ(d.push(byte('a')), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(d.push(byte(0xED)), "");
  EXPECT_EQ(d.push(byte(0xA0)), "\xEF\xBF\xBD\xEF\xBF\xBD");  // ED A0 would be a surrogate
  EXPECT_EQ(d.push(byte(0xF0)), "");
  EXPECT_EQ(d.push(byte(0x9F)), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");  // an unfinished character at the end
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST_F(DetokenizerTest, ControlTokensOnlyWhenAsked) {
  IncrementalDetokenizer plain(*tok), special(*tok, /*special=*/true);
  EXPECT_EQ(plain.push(tok->eos_id()), "");
  EXPECT_EQ(special.push(tok->eos_id()), "</s>");
  EXPECT_THROW(plain.push(tok->n_vocab()), Error);
}

// Property: for random token streams (mostly byte tokens, so characters split everywhere),
// every chunk is valid UTF-8 and all chunks together equal the sanitized bytes.
TEST_F(DetokenizerTest, RandomStreamsMatchSanitizedBytes) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    IncrementalDetokenizer d(*tok);
    std::string bytes, out;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      const int32_t id = rng() % 4 == 0 ? static_cast<int32_t>(259 + rng() % 253) : byte(static_cast<uint8_t>(rng()));
      bytes += tok->token_to_piece(id);
      const std::string part = d.push(id);
      ASSERT_TRUE(utf8_is_valid(part));
      out += part;
    }
    out += d.flush();
    ASSERT_EQ(out, utf8_sanitize(bytes)) << "round " << round;
  }
}

}  // namespace
}  // namespace lumen
