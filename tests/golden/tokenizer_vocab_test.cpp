// Tokenizer conformance on llama.cpp's vocabulary test vectors (shared/vocab): every string of
// every NAME.gguf.inp must encode (no BOS/EOS) to the ids on the same line of NAME.gguf.out.
// The strings are separated by "\n__ggml_vocab_test__\n" (the file also ends with one), as in
// llama.cpp's test-tokenizer-0, which encodes with special-token parsing off; we check both
// settings (none of the strings spells a special token).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "test_support.h"
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
  for (int32_t id : v) s += " " + std::to_string(id);
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
