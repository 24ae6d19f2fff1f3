// Tokenization against llama.cpp's recorded reference data (shared/reference/*.json and
// reference/quant-models/*.json): every prompt's tokens with and without BOS, every
// tokenization_extra entry (with and without special-token parsing; entries where llama.cpp
// failed must throw lumen::Error), the server's piece strings, and the perplexity texts'
// token ids. Synthetic models are not generated here: their vocabulary is the file named by
// --vocab-from in model.generate.command, which is tokenized directly.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace lumen {
namespace {

using nlohmann::json;

std::vector<std::string> reference_files() {
  std::vector<std::string> files;
  for (const char* dir : {"reference", "reference/quant-models"}) {
    const std::string path = test::shared_path(dir);
    if (!std::filesystem::is_directory(path)) continue;
    for (const auto& e : std::filesystem::directory_iterator(path))
      if (e.path().extension() == ".json") files.push_back(std::string(dir) + "/" + e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) files.push_back("(none)");
  return files;
}

// The vocabulary a reference file's model uses, relative to shared/ ("" when unknown).
std::string vocab_of(const json& model) {
  if (model.contains("path_in_shared")) return model["path_in_shared"].get<std::string>();
  if (model.contains("generate")) {
    const std::string cmd = model["generate"]["command"].get<std::string>();
    const std::string flag = "--vocab-from ../shared/";
    const size_t at = cmd.find(flag);
    if (at != std::string::npos) {
      const size_t begin = at + flag.size();
      return cmd.substr(begin, cmd.find(' ', begin) - begin);
    }
  }
  return "";
}

const Tokenizer& tokenizer_for(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[rel];
  if (!slot) slot = Tokenizer::from_gguf(*GgufFile::open(test::shared_path(rel)));
  return *slot;
}

std::vector<int32_t> ids(const json& j) { return j.get<std::vector<int32_t>>(); }

// Expects `encode` to give `expected`, or to throw lumen::Error where llama.cpp failed.
void check(const Tokenizer& tok, const std::string& text, bool add_special, bool parse_special, const json& expected,
           const std::string& what) {
  SCOPED_TRACE(what + " text='" + text + "' add_special=" + std::to_string(add_special) +
               " parse_special=" + std::to_string(parse_special));
  if (expected.is_object()) {
    ASSERT_TRUE(expected.contains("error"));
    EXPECT_THROW(tok.encode(text, add_special, parse_special), Error);
    return;
  }
  EXPECT_EQ(tok.encode(text, add_special, parse_special), ids(expected));
}

void check_pieces(const Tokenizer& tok, const json& token_ids, const json& pieces) {
  ASSERT_EQ(token_ids.size(), pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string want;
    if (pieces[i].is_string()) {
      want = pieces[i].get<std::string>();
    } else {
      for (int b : pieces[i]) want += static_cast<char>(b);
    }
    EXPECT_EQ(tok.token_to_piece(token_ids[i].get<int32_t>(), /*special=*/true), want) << "token " << token_ids[i];
  }
}

class TokenizerReference : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerReference, MatchesLlamaCpp) {
  if (GetParam() == "(none)") GTEST_SKIP() << "no reference files under " << test::shared_dir();
  const json ref = json::parse(test::read_file(test::shared_path(GetParam())));
  const std::string vocab = vocab_of(ref["model"]);
  ASSERT_FALSE(vocab.empty()) << GetParam() << ": cannot tell which vocabulary the model uses";
  if (!test::shared_exists(vocab)) GTEST_SKIP() << vocab << " is not in " << test::shared_dir();
  const Tokenizer& tok = tokenizer_for(vocab);

  const json& info = ref["model"]["tokenizer"];
  EXPECT_EQ(tok.n_vocab(), info["n_vocab"].get<int>());
  EXPECT_EQ(tok.bos_id(), info["bos_token_id"].get<int>());
  EXPECT_EQ(tok.eos_id(), info["eos_token_id"].get<int>());
  EXPECT_EQ(tok.vocab().unk(), info["unknown_token_id"].get<int>());
  EXPECT_EQ(tok.add_bos(), info["add_bos_token"].get<bool>());
  EXPECT_EQ(tok.add_eos(), info["add_eos_token"].get<bool>());
  EXPECT_EQ(tok.vocab().add_space_prefix(), info["add_space_prefix"].get<bool>());
  EXPECT_TRUE(tok.is_eog(tok.eos_id()));

  int n_checked = 0;
  for (const json& p : ref["prompts"]) {
    const std::string text = p["text"];
    check(tok, text, true, true, p["tokens_with_bos"], "prompt");
    check(tok, text, false, true, p["tokens_without_bos"], "prompt");
    check_pieces(tok, p["tokens_with_bos"], p["pieces_with_bos"]);
    n_checked += 2;
  }
  for (const json& e : ref["tokenization_extra"]) {
    const std::string text = e["text"];
    check(tok, text, true, true, e["tokens_with_bos"], "extra");
    check(tok, text, false, true, e["tokens_without_bos"], "extra");
    check(tok, text, true, false, e["tokens_with_bos_no_parse_special"], "extra");
    if (e.contains("pieces_with_bos") && e["tokens_with_bos"].is_array())
      check_pieces(tok, e["tokens_with_bos"], e["pieces_with_bos"]);
    n_checked += 3;
  }
  // llama-perplexity: the whole text (less one trailing newline) with BOS, no special parsing.
  for (const json& p : ref["perplexity"]) {
    std::string text;
    if (p["text"].contains("content")) {
      text = p["text"]["content"].get<std::string>();
    } else {
      const std::string path = p["text"]["path"];
      if (!std::filesystem::exists(path)) continue;
      text = test::read_file(path);
      if (text.size() != p["text"]["bytes"].get<size_t>()) continue;  // another version of the file
    }
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const auto got = tok.encode(text, true, false);
    EXPECT_EQ(static_cast<int64_t>(got.size()), p["n_tokens_in_text"].get<int64_t>());
    const auto want = ids(p["tokens"]);
    ASSERT_GE(got.size(), want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << "perplexity text tokens differ";
    ++n_checked;
  }
  EXPECT_GT(n_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(AllFiles, TokenizerReference, ::testing::ValuesIn(reference_files()), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

}  // namespace
}  // namespace lumen
