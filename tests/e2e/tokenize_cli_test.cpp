// `lumen tokenize` driven as a user would: ids that match llama.cpp's vocabulary test vectors
// (a few strings per vocabulary; the in-process golden tests cover all of them), the default
// "id -> 'piece'" listing, BOS and special-token switches, and one-line errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace lumen {
namespace {

std::vector<std::string> vocab_inputs(const std::string& base) {
  const std::string raw = test::read_file(test::shared_path(base + ".inp"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    out.push_back(raw.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::string> vocab_outputs(const std::string& base) {
  std::istringstream in(test::read_file(test::shared_path(base + ".out")));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ids(line);
    std::string json = "[";
    for (int id; ids >> id;) json += (json.size() > 1 ? ", " : "") + std::to_string(id);
    out.push_back(json + "]\n");
  }
  return out;
}


// `lumen tokenize --no-bos --ids` on the strings given (by index) of one vocabulary's test file.
void check_vocab_lines(const std::string& name, const std::vector<size_t>& which) {
  const std::string base = "vocab/ggml-vocab-" + name + ".gguf";
  if (!test::shared_exists(base)) GTEST_SKIP() << base << " not found";
  const auto inputs = vocab_inputs(base);
  const auto outputs = vocab_outputs(base);
  ASSERT_EQ(inputs.size(), outputs.size());
  for (size_t i : which) {
    ASSERT_LT(i, inputs.size());
    const test::TempFile text(inputs[i]);
    const auto r = test::run_cli("tokenize -m " + test::shell_quote(test::shared_path(base)) + " --no-bos --ids --file " +
                                 test::shell_quote(text.path()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, outputs[i]) << name << " string " << i << ": '" << inputs[i] << "'";
  }
}

TEST(TokenizeCli, LlamaSpmVectors) { check_vocab_lines("llama-spm", {0, 2, 8, 18, 19, 45}); }
TEST(TokenizeCli, Gpt2Vectors) { check_vocab_lines("gpt-2", {7, 20, 45}); }
TEST(TokenizeCli, Qwen2Vectors) { check_vocab_lines("qwen2", {33, 45}); }

TEST(TokenizeCli, TextArgumentBosAndSpecialSwitches) {
  if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "stories260K.gguf not found";
  const std::string m = "tokenize -m " + test::shell_quote(test::shared_path("models/stories260K.gguf"));
  auto r = test::run_cli(m + " --ids 'Once upon a time'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
  EXPECT_EQ(test::run_cli(m + " --ids --no-bos 'Once upon a time'").out, "[403, 407, 261, 378]\n");
  EXPECT_EQ(test::run_cli(m + " --ids '<s>Once'").out, "[1, 1, 403]\n");
  EXPECT_EQ(test::run_cli(m + " --ids --no-parse-special '<s>Once'").out, "[1, 410, 504, 419, 505, 441, 416, 331]\n");
  EXPECT_EQ(test::run_cli(m + " --ids ''").out, "[1]\n");
  EXPECT_EQ(test::run_cli(m + " --ids --no-bos ''").out, "[]\n");
  r = test::run_cli(m + " 'Hello world'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "     1 -> '<s>'\n   346 -> ' He'\n   306 -> 'll'\n   414 -> 'o'\n   263 -> ' w'\n   304 -> 'or'\n"
            "   341 -> 'ld'\n");
}

TEST(TokenizeCli, ErrorsAreOneLineAndNonZero) {
  if (!test::shared_exists("models/zh-tang-poem-750K.gguf")) GTEST_SKIP() << "poem model not found";
  // The poem model has no byte-fallback tokens: English text cannot be tokenized.
  auto r = test::run_cli("tokenize -m " + test::shell_quote(test::shared_path("models/zh-tang-poem-750K.gguf")) + " --ids Hello");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("'H'"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // ...but its own characters can.
  r = test::run_cli("tokenize -m " + test::shell_quote(test::shared_path("models/zh-tang-poem-750K.gguf")) + " --ids 春风");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 13, 38, 29]\n");

  r = test::run_cli("tokenize -m /nonexistent/model.gguf --ids hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  r = test::run_cli("tokenize -m " + test::shell_quote(test::shared_path("models/zh-tang-poem-750K.gguf")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("TEXT"), std::string::npos) << r.err;
  r = test::run_cli("tokenize -m " + test::shell_quote(test::shared_path("models/zh-tang-poem-750K.gguf")) +
                    " --file /nonexistent/text.txt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/text.txt"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lumen
