// `lumen plan` as a user runs it: a table for a person, JSON for scripts, clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace lumen {
namespace {

TEST(PlanCli, JsonHasTheFiguresAndTheAlternatives) {
  const auto r = test::run_cli("plan -m " + test::shell_quote(test::shared_path("models/stories260K.gguf")) +
                               " -c 2048 --parallel 4 --memory 64MiB --kv-type-k q8_0 --kv-type-v q4_0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_ctx"], 2048);
  EXPECT_EQ(j["parallel"], 4);
  EXPECT_EQ(j["memory_bytes"], 64 << 20);
  // Each head's slice is whole blocks (stories260K's heads of 8 pad one block each).
  const double blocks = j["n_layer"].get<double>() * j["n_head_kv"].get<double>() * std::ceil(j["head_dim_k"].get<double>() / 32);
  EXPECT_DOUBLE_EQ(j["plan"]["kv_bytes_per_token"].get<double>(), blocks * (34.0 + 18.0));
  EXPECT_EQ(j["plan"]["kv_type_k"], "Q8_0");
  EXPECT_EQ(j["plan"]["kv_type_v"], "Q4_0");
  EXPECT_GE(j["alternatives"].size(), 7u);
  EXPECT_TRUE(j["parallel_fits"].get<bool>());
}

TEST(PlanCli, TableAndErrors) {
  auto r = test::run_cli("plan -m " + test::shell_quote(test::shared_path("models/stories260K.gguf")) + " -c 512");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("KV cache:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("what if"), std::string::npos) << r.out;
  r = test::run_cli("plan -m " + test::shell_quote(test::shared_path("models/stories260K.gguf")) + " --kv-type-k q5_1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--kv-type-k 'q5_1'"), std::string::npos) << r.err;
  r = test::run_cli("plan -m /nonexistent.gguf");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace lumen
