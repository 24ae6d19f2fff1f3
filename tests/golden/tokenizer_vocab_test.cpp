// Tokenizer conformance on llama.cpp's vocabulary test vectors (shared/vocab): every string of
// every NAME.gguf.inp must encode (no BOS/EOS) to the ids on the same line of NAME.gguf.out.
// The strings are separated by "\n__ggml_vocab_test__\n" (the file also ends with one), as in
// llama.cpp's test-tokenizer-0, which encodes with special-token parsing off; we check both
// settings (none of the strings spells a special token).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

std::vector<std::string> split_inputs(const std::string& raw) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      out.push_back(raw.substr(pos));
      break;
    }
    out.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const std::string& raw) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(raw);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    for (int32_t id; ids >> id;) v.push_back(id);
    out.push_back(v);
  }
  return out;
}

// Each vocabulary is loaded once per test binary (the big ones take a while).
const Tokenizer& tokenizer_for(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[rel];
  if (!slot) slot = Tokenizer::from_gguf(*GgufFile::open(test::shared_path(rel)));
  return *slot;
}

std::string ids_str(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t id : v) {
    s += ' ';  // appended apart: GCC 12's -Wrestrict misreads " " + std::to_string(id)
    s += std::to_string(id);
  }
  return s;
}

class VocabGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabGolden, ReproducesEveryLine) {
  const std::string base = "vocab/ggml-vocab-" + GetParam() + ".gguf";
  if (!test::shared_exists(base)) GTEST_SKIP() << base << " not found under " << test::shared_dir();
  const Tokenizer* tok = &tokenizer_for(base);
  const auto inputs = split_inputs(test::read_file(test::shared_path(base + ".inp")));
  const auto expected = read_outputs(test::read_file(test::shared_path(base + ".out")));
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(inputs.size(), expected.size());
  int n_ok = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (bool parse_special : {false, true}) {
      const auto got = tok->encode(inputs[i], /*add_special=*/false, parse_special);
      EXPECT_EQ(got, expected[i]) << GetParam() << " string " << i << " '" << inputs[i]
                                  << "' parse_special=" << parse_special << "\n  got:     " << ids_str(got)
                                  << "\n  expected:" << ids_str(expected[i]);
      n_ok += got == expected[i];
    }
  }
  EXPECT_EQ(n_ok, 2 * static_cast<int>(inputs.size()));
}

// Decoding what was encoded gives the text back (SPM: the space prefix is dropped again; the
// BPE vocabularies here that clean up spaces are skipped where that applies).
TEST_P(VocabGolden, DecodeRoundTrips) {
  const std::string base = "vocab/ggml-vocab-" + GetParam() + ".gguf";
  if (!test::shared_exists(base)) GTEST_SKIP() << base << " not found";
  const Tokenizer* tok = &tokenizer_for(base);
  for (const std::string& s : split_inputs(test::read_file(test::shared_path(base + ".inp")))) {
    const std::string back = tok->decode(tok->encode(s, false, false));
    if (tok->vocab().clean_spaces()) continue;  // llama.cpp's clean-up changes " ," etc.
    EXPECT_EQ(back, s) << GetParam();
  }
}

// A tokenizer-only GGUF (v3, no tensors) built in memory, for metadata edge cases.
class MiniGguf {
 public:
  MiniGguf& str(const std::string& key, const std::string& v) {
    kv(key, 8);
    put_str(v);
    return *this;
  }
  MiniGguf& u32(const std::string& key, uint32_t v) {
    kv(key, 4);
    put(v);
    return *this;
  }
  MiniGguf& boolean(const std::string& key, bool v) {
    kv(key, 7);
    body_ += static_cast<char>(v);
    return *this;
  }
  MiniGguf& strings(const std::string& key, const std::vector<std::string>& v) {
    kv(key, 9);
    put(uint32_t{8});
    put(uint64_t{v.size()});
    for (const auto& x : v) put_str(x);
    return *this;
  }
  MiniGguf& ints(const std::string& key, const std::vector<int32_t>& v) {
    kv(key, 9);
    put(uint32_t{5});
    put(uint64_t{v.size()});
    for (int32_t x : v) put(x);
    return *this;
  }
  MiniGguf& floats(const std::string& key, const std::vector<float>& v) {
    kv(key, 9);
    put(uint32_t{6});
    put(uint64_t{v.size()});
    for (float x : v) put(x);
    return *this;
  }
  std::unique_ptr<Tokenizer> load() const {
    std::string file = "GGUF";
    auto raw = [&](auto x) { file.append(reinterpret_cast<const char*>(&x), sizeof x); };
    raw(uint32_t{3});
    raw(uint64_t{0});
    raw(uint64_t{n_kv_});
    file += body_;
    auto gguf = GgufFile::parse(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "mini.gguf");
    return Tokenizer::from_gguf(*gguf);
  }

 private:
  template <class T>
  void put(T x) {
    body_.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  void put_str(const std::string& v) {
    put(uint64_t{v.size()});
    body_ += v;
  }
  void kv(const std::string& key, uint32_t type) {
    put_str(key);
    put(type);
    ++n_kv_;
  }
  std::string body_;
  uint64_t n_kv_ = 0;
};

// A byte-level vocabulary: the 256 GPT-2 byte characters, then "ab", "abc", then "<|end|>".
MiniGguf mini_bpe(const std::string& pre) {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    const uint32_t cp = gpt2_byte_to_codepoint(static_cast<uint8_t>(b));
    if (cp < 0x80) s += static_cast<char>(cp);
    else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    toks.push_back(s);
  }
  toks.push_back("ab");
  toks.push_back("abc");
  toks.push_back("<|end|>");
  std::vector<int32_t> types(toks.size(), 1);
  types.back() = 3;
  MiniGguf g;
  g.str("tokenizer.ggml.model", "gpt2").str("tokenizer.ggml.pre", pre).strings("tokenizer.ggml.tokens", toks);
  g.ints("tokenizer.ggml.token_type", types).strings("tokenizer.ggml.merges", {"a b", "ab c"});
  g.u32("tokenizer.ggml.eos_token_id", 258);
  return g;
}

TEST(TokenizerLoad, UnknownModelOrPreTypeIsAnError) {
  MiniGguf bad;
  bad.str("tokenizer.ggml.model", "wordpiece-9000").strings("tokenizer.ggml.tokens", {"a", "b"});
  try {
    bad.load();
    FAIL() << "an unknown tokenizer model must not load";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wordpiece-9000"), std::string::npos) << e.what();
  }
  try {
    mini_bpe("no-such-pre").load();
    FAIL() << "an unknown pre-tokenizer type must not load";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-pre"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MiniGguf().str("general.name", "x").load(), Error);  // no tokenizer at all
  MiniGguf dup;
  dup.str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "a"});
  EXPECT_THROW(dup.load(), Error);
  // GLM's vocabularies have no BOS; asking to add one is an error, not a silent no-op.
  EXPECT_FALSE(mini_bpe("glm4").load()->vocab().valid_id(mini_bpe("glm4").load()->bos_id()));
  EXPECT_THROW(mini_bpe("glm4").boolean("tokenizer.ggml.add_bos_token", true).load(), Error);
  // An id of 0xFFFFFFFF means "none" and keeps the default.
  EXPECT_EQ(mini_bpe("gpt-2").u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu).load()->bos_id(), 11);
}

TEST(TokenizerLoad, BpeDefaultsFollowThePreType) {
  auto gpt2 = mini_bpe("gpt-2").load();
  EXPECT_FALSE(gpt2->add_bos());
  EXPECT_EQ(gpt2->bos_id(), 11);  // llama.cpp's default for BPE vocabularies
  EXPECT_TRUE(mini_bpe("llama-bpe").load()->add_bos());
  EXPECT_FALSE(mini_bpe("llama-bpe").boolean("tokenizer.ggml.add_bos_token", false).load()->add_bos());
  EXPECT_TRUE(gpt2->is_eog(258));  // "<|end|>" by its text, and as the EOS
  // Token b is byte b's character: " abd" is Ġ + "ab" + d.
  EXPECT_EQ(gpt2->encode("abc abd", false, false), (std::vector<int32_t>{257, ' ', 256, 'd'}));
  EXPECT_EQ(gpt2->decode(gpt2->encode("abc abd", false, false)), "abc abd");
  EXPECT_EQ(gpt2->encode("x<|end|>", false, true), (std::vector<int32_t>{'x', 258}));
  EXPECT_EQ(gpt2->token_to_piece(258), "");
  EXPECT_EQ(gpt2->token_to_piece(258, true), "<|end|>");
}

TEST(TokenizerLoad, SpmWithoutByteTokensFailsClearly) {
  MiniGguf g;
  g.str("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab"})
      .floats("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3, -1})
      .ints("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1});
  auto tok = g.load();
  EXPECT_EQ(tok->encode("ab a", true, true), (std::vector<int32_t>{1, 3, 6, 3, 4}));
  try {
    tok->encode("abc", true, true);
    FAIL() << "'c' has no token and there is no byte fallback";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'c'"), std::string::npos) << e.what();
  }
}

// Special tokens in real vocabularies: end-of-generation sets, parsing, rstrip, BOS rules.
TEST(TokenizerSpecial, ChatTokensAndEndOfGeneration) {
  if (!test::shared_exists("vocab/ggml-vocab-qwen2.gguf")) GTEST_SKIP() << "shared vocab not found";
  const Tokenizer& qwen = tokenizer_for("vocab/ggml-vocab-qwen2.gguf");
  EXPECT_FALSE(qwen.add_bos());
  EXPECT_TRUE(qwen.is_eog(151643));  // <|endoftext|>
  EXPECT_TRUE(qwen.is_eog(151645));  // <|im_end|>
  EXPECT_FALSE(qwen.is_eog(151644));
  const std::string chat = "<|im_start|>user\nhi<|im_end|>";
  const auto parsed = qwen.encode(chat, true, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 151644);
  EXPECT_EQ(parsed.back(), 151645);
  const auto plain = qwen.encode(chat, true, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(qwen.decode(plain), chat);  // as text it round-trips
  EXPECT_EQ(qwen.decode(parsed), "user\nhi");  // control tokens render as nothing...
  EXPECT_EQ(qwen.decode(parsed, /*special=*/true), chat);  // ...unless asked

  const Tokenizer& llama3 = tokenizer_for("vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_TRUE(llama3.add_bos());  // llama-bpe pre-type default, and the file says so too
  EXPECT_EQ(llama3.encode("hi", true, true).front(), 128000);
  EXPECT_TRUE(llama3.is_eog(128001));  // <|end_of_text|>
  EXPECT_TRUE(llama3.is_eog(128009));  // <|eot_id|>
  EXPECT_TRUE(llama3.is_control(128009));
}

TEST(TokenizerSpecial, Phi3SpecialTokensSwallowFollowingWhitespace) {
  if (!test::shared_exists("vocab/ggml-vocab-phi-3.gguf")) GTEST_SKIP() << "shared vocab not found";
  const Tokenizer& phi = tokenizer_for("vocab/ggml-vocab-phi-3.gguf");
  const int32_t user = phi.vocab().find("<|user|>");
  ASSERT_NE(user, kTokenNull);
  const auto a = phi.encode("<|user|>  \n hi", false, true);
  EXPECT_EQ(a, phi.encode("<|user|>hi", false, true));
  EXPECT_EQ(a.front(), user);
  // <s> is exempt: the space after it stays (and the space prefix is added again after it).
  EXPECT_NE(phi.encode("<s> hi", false, true), phi.encode("<s>hi", false, true));
}

TEST(TokenizerSpecial, SpmSpacePrefixAndDecode) {
  if (!test::shared_exists("vocab/ggml-vocab-llama-spm.gguf")) GTEST_SKIP() << "shared vocab not found";
  const Tokenizer& spm = tokenizer_for("vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm.encode("Hello world", true, true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(spm.encode("", true, true), (std::vector<int32_t>{1}));
  EXPECT_EQ(spm.encode("", false, true), (std::vector<int32_t>{}));
  // A space prefix again after each special token in the text.
  EXPECT_EQ(spm.encode("Hello</s>world", false, true), (std::vector<int32_t>{15043, 2, 3186}));
  EXPECT_EQ(spm.token_to_piece(15043), " Hello");
  EXPECT_EQ(spm.token_to_piece(1), "");
  EXPECT_EQ(spm.token_to_piece(1, true), "<s>");
  EXPECT_EQ(spm.token_to_piece(3 + 0xE6), "\xE6");  // byte token <0xE6>
  EXPECT_EQ(spm.decode({15043, 3186}), "Hello world");     // the space prefix is removed...
  EXPECT_EQ(spm.decode({1, 15043, 3186}), " Hello world");  // ...but not after BOS (as llama.cpp)
  EXPECT_THROW(spm.token_to_piece(32000), Error);
  EXPECT_THROW(spm.token_to_piece(-1), Error);
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabGolden,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon", "starcoder",
                                           "refact", "llama-bpe", "qwen2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace lumen
