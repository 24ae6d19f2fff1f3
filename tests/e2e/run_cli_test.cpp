// `lumen run` and `lumen perplexity` driven as a user would.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace lumen {
namespace {

using nlohmann::json;

class RunCli : public testing::Test {
 protected:
  void SetUp() override {
    if (!test::shared_exists("models/stories260K.gguf")) GTEST_SKIP() << "no shared models";
    ref_ = json::parse(test::read_file(test::shared_path("reference/stories260K.json")));
    model_ = "-m " + test::shared_path("models/stories260K.gguf") + " -t 2";
  }
  json ref_;
  std::string model_;
};

TEST_F(RunCli, PrintsTheReferenceStoryAndTimings) {
  const json& p = ref_["prompts"][0];
  ASSERT_EQ(p["text"], "Once upon a time");
  auto r = test::run_cli("run " + model_ + " -p 'Once upon a time' -n 48");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time" + p["greedy_f32_attention"]["generated_text"].get<std::string>());
  for (const char* line : {"prompt tokens:", "TTFT:", "prefill:", "decode:", "ITL:", "p50", "p99"})
    EXPECT_NE(r.err.find(line), std::string::npos) << line << " missing from:\n" << r.err;
}

TEST_F(RunCli, DefaultModelWithoutDashM) {
  // Without -m, lumen uses $LUMEN_MODEL, else $LUMEN_SHARED/models/stories260K.gguf.
  setenv("LUMEN_SHARED", test::shared_dir().c_str(), 1);
  auto r = test::run_cli("run -t 2 -p 'Once upon a time' -n 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["prompt_tokens"], ref_["prompts"][0]["tokens_with_bos"]);
}

TEST_F(RunCli, JsonHasTokensTextAndTimings) {
  for (const json& p : ref_["prompts"]) {
    const json& rec = p["greedy_f32_attention"];
    auto r = test::run_cli("run " + model_ + " --json -n 48 -p '" + p["text"].get<std::string>() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["prompt_tokens"], rec["prompt_token_ids"]) << p["text"];
    EXPECT_EQ(j["tokens"], rec["generated_token_ids"]) << p["text"];
    EXPECT_EQ(j["text"], rec["generated_text"]);
    for (const char* k : {"ttft_ms", "prefill_tok_s", "decode_tok_s", "itl_ms_mean", "itl_ms_p50", "itl_ms_p99"})
      EXPECT_TRUE(j["timings"].contains(k)) << k;
  }
}

// Speculative decoding from the command line: the same greedy text, and timings.spec in the JSON.
TEST_F(RunCli, SpeculativeDecodingKeepsTheGreedyTextAndReportsSpec) {
  const std::string prompt = test::shell_quote("Lily and Tom went to the park. Lily and Tom went to the park.");
  auto plain = test::run_cli("run " + model_ + " -p " + prompt + " -n 32 --temp 0 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const std::string& spec : std::vector<std::string>{"--spec-ngram --spec-always", "--draft-model " + test::shared_path("models/stories260K.gguf")}) {
    SCOPED_TRACE(spec);
    auto r = test::run_cli("run " + model_ + " -p " + prompt + " -n 32 --temp 0 --json " + spec);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json a = json::parse(plain.out), b = json::parse(r.out);
    EXPECT_EQ(b["tokens"], a["tokens"]);
    ASSERT_TRUE(b["timings"].contains("spec")) << r.out;
    const json& s = b["timings"]["spec"];
    for (const char* k : {"proposed", "accepted", "acceptance_rate", "tokens_per_target_pass"}) EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_GE(s["tokens_per_target_pass"].get<double>(), 1.0);
    ASSERT_TRUE(s["acceptance_rate_per_position"].is_array());
    for (const auto& rate : s["acceptance_rate_per_position"]) EXPECT_TRUE(rate.get<double>() >= 0 && rate.get<double>() <= 1);
  }
  EXPECT_FALSE(json::parse(plain.out)["timings"].contains("spec"));
}

TEST_F(RunCli, LogitBiasBansAToken) {
  auto base = json::parse(test::run_cli("run " + model_ + " --json -n 8 -p 'Once upon a time'").out);
  const int first = base["tokens"][0];
  auto r = test::run_cli("run " + model_ + " --json -n 8 -p 'Once upon a time' --logit-bias " + std::to_string(first) + "=-inf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  for (auto& t : j["tokens"]) EXPECT_NE(t.get<int>(), first);
}

TEST_F(RunCli, SameSeedSameText) {
  const std::string cmd = "run " + model_ + " --json -n 24 --temp 1.0 --top-k 0 --top-p 1 --min-p 0 -p 'The little dog' --seed ";
  auto a = json::parse(test::run_cli(cmd + "7").out);
  auto b = json::parse(test::run_cli(cmd + "7").out);
  auto c = json::parse(test::run_cli(cmd + "8").out);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_NE(a["tokens"], c["tokens"]);
}

TEST_F(RunCli, PromptsFromStdin) {
  auto r = test::run_cli("run " + model_ + " --json -n 4", "Once upon a time\nThe little dog\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int lines = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    EXPECT_NO_THROW(json::parse(line));
    lines++;
  }
  EXPECT_EQ(lines, 2);
}

TEST_F(RunCli, ClearErrors) {
  auto r = test::run_cli("run -m /nonexistent.gguf -p hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
  r = test::run_cli("run " + model_ + " -c 4 -p 'Once upon a time there was'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("context"), std::string::npos) << r.err;
  r = test::run_cli("run " + model_ + " -p hi --logit-bias abc");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("logit-bias"), std::string::npos) << r.err;
  r = test::run_cli("run " + model_ + " -p hi --top-p 2");
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(RunCli, StopsAtContextEnd) {
  auto r = test::run_cli("run " + model_ + " --json -c 12 -n 100 -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["stop_reason"], "length");
  EXPECT_EQ(j["prompt_tokens"].size() + j["tokens"].size(), 12u);  // a sequence holds at most -c tokens
}

// Prompts from stdin run concurrently and come out in input order, each exactly as it runs alone.
TEST_F(RunCli, ParallelPromptsEqualLoneRunsInInputOrder) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily wanted to", "The sun was"};
  std::string input;
  for (const auto& p : prompts) input += p + "\n";
  auto all = test::run_cli("run " + model_ + " --json -n 24 --temp 0.8 --seed 7 --parallel 4 --max-batch-tokens 8", input);
  ASSERT_EQ(all.exit_code, 0) << all.err;
  std::istringstream lines(all.out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); i++) {
    ASSERT_LT(i, prompts.size());
    const json j = json::parse(line);
    auto one = test::run_cli("run " + model_ + " --json -n 24 --temp 0.8 --seed 7 -p '" + prompts[i] + "'");
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const json o = json::parse(one.out);
    EXPECT_EQ(j["prompt_tokens"], o["prompt_tokens"]) << prompts[i];
    EXPECT_EQ(j["tokens"], o["tokens"]) << prompts[i];
    EXPECT_TRUE(j["timings"].contains("cached_prompt_tokens"));
  }
  EXPECT_EQ(i, prompts.size());
}

TEST_F(RunCli, RepeatedPromptReportsCachedTokens) {
  const std::string story = "Once upon a time there was a little girl named Lily who loved to play in the park with her dog";
  auto r = test::run_cli("run " + model_ + " --json -n 4 --parallel 1", story + "\n" + story + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string a, b;
  std::getline(lines, a);
  std::getline(lines, b);
  const json ja = json::parse(a), jb = json::parse(b);
  EXPECT_EQ(ja["timings"]["cached_prompt_tokens"], 0);
  EXPECT_GE(jb["timings"]["cached_prompt_tokens"].get<int>(), 16);
  EXPECT_EQ(ja["tokens"], jb["tokens"]);
  auto off = test::run_cli("run " + model_ + " --json -n 4 --parallel 1 --no-prefix-cache", story + "\n" + story + "\n");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  std::istringstream l2(off.out);
  std::getline(l2, a);
  std::getline(l2, b);
  EXPECT_EQ(json::parse(b)["timings"]["cached_prompt_tokens"], 0);
}

TEST_F(RunCli, OverlongPromptIsRefusedNotTruncated) {
  auto r = test::run_cli("run " + model_ + " -c 8 -p 'Once upon a time there was a little girl named Lily'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("context of 8 tokens"), std::string::npos) << r.err;
}

TEST_F(RunCli, PerplexityMatchesReference) {
  const json& e = ref_["perplexity"][0];
  const auto running = e["variant_f32_attention"]["running_ppl_per_chunk"].get<std::vector<double>>();
  auto r = test::run_cli("perplexity " + model_ + " -c 128 --chunks 4 -f /usr/share/common-licenses/GPL-3");
  if (r.exit_code != 0 && r.err.find("GPL-3") != std::string::npos) GTEST_SKIP() << "no GPL-3 text";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto pos = r.out.rfind("Final estimate: PPL = ");
  ASSERT_NE(pos, std::string::npos) << r.out;
  const double ppl = std::stod(r.out.substr(pos + 22));
  EXPECT_NEAR(ppl, running[3], running[3] * 1e-4);
}

// Quantized KV caches from the command line: perplexity names the types it runs with and an
// 8-bit cache stays near the F32 reference; run accepts K and V of different types; a bad
// name is refused with the choices.
TEST_F(RunCli, KvCacheTypes) {
  const json& e = ref_["perplexity"][0];
  const double want = e["variant_f32_attention"]["running_ppl_per_chunk"][3];
  auto r = test::run_cli("perplexity " + model_ + " -c 128 --chunks 4 -f /usr/share/common-licenses/GPL-3 --kv-type Q8_0");
  if (r.exit_code != 0 && r.err.find("GPL-3") != std::string::npos) GTEST_SKIP() << "no GPL-3 text";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("K Q8_0 / V Q8_0"), std::string::npos) << r.err;
  const auto pos = r.out.rfind("Final estimate: PPL = ");
  ASSERT_NE(pos, std::string::npos) << r.out;
  // Over these 4 chunks Q8_0 reads +1.1% (over the reference's 47, +0.4%: the golden test's 0.5%).
  EXPECT_NEAR(std::stod(r.out.substr(pos + 22)), want, want * 0.02);
  r = test::run_cli("run " + model_ + " -p 'Once upon a time' -n 8 --kv-type-k q8_0 --kv-type-v q4_0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = test::run_cli("run " + model_ + " -p 'Once upon a time' -n 8 --kv-type-k q4_1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-type-k 'q4_1': expected f32, f16, bf16, q8_0 or q4_0"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lumen
