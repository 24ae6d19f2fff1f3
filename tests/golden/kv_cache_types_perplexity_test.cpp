// Perplexity with quantized KV caches (llama-perplexity's text and settings from
// ../shared/reference/stories260K.json): an 8-bit K and V cost at most 1% against F16 over the
// reference's chunks (all of them, sanitized builds too: over the first 4 alone the figure is
// +1.1%, noise of a tiny model). On stories260K a head is 8 elements, so each head's slice pads
// one Q8_0 block and the kernels take their path for slices shorter than a block. Such heads
// move the figure by roundings alone: a Q8_0 V with an F16-exact K measured -0.53%, and the
// query's Q8_0 rounding that a Q8_0 K meets (kernels/attention.h, as llama.cpp) took Q8_0/Q8_0
// from +0.41% to +0.63%; 64-wide heads (../shared small256-F16) moved by under 0.001%. Runs
// under every forced ISA with the golden suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "diagnostics/perplexity.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "test_support.h"

namespace lumen {
namespace {

TEST(KvCacheTypesPerplexity, Q8_0StaysWithinOnePercentOfF16) {
  const std::string rel = "reference/stories260K.json";
  if (!test::shared_exists(rel) || !test::shared_exists("models/stories260K.gguf")) GTEST_SKIP();
  const auto ref = nlohmann::json::parse(test::read_file(test::shared_path(rel)));
  const nlohmann::json& e = ref["perplexity"][0];
  const auto tokens = e["tokens"].get<std::vector<int32_t>>();
  const int64_t n_ctx = e["n_ctx"];
  const int64_t n_chunks = e["n_chunks"];
  ModelOptions opt;
  opt.n_threads = 2;
  opt.n_batch = n_ctx;
  const auto model = Model::load(GgufFile::open(test::shared_path("models/stories260K.gguf")), opt);
  auto ppl = [&](GgmlType k, GgmlType v) { return compute_perplexity(*model, tokens, n_ctx, n_chunks, tokens[0], k, v).ppl; };
  const double f16 = ppl(GgmlType::F16, GgmlType::F16);
  const double q8 = ppl(GgmlType::Q8_0, GgmlType::Q8_0);
  RecordProperty("ppl_f16", std::to_string(f16));
  RecordProperty("ppl_q8_0", std::to_string(q8));
  EXPECT_LE(std::fabs(q8 - f16) / f16, 0.01) << "F16 " << f16 << ", Q8_0 " << q8;
  // And the F16 cache itself is the reference's F32-attention figure, nearly.
  const double want = e["variant_f32_attention"]["ppl"];
  if (!test::sanitized_build()) {
    EXPECT_LE(std::fabs(f16 - want) / want, 1e-4) << f16 << " vs " << want;
  }
}

}  // namespace
}  // namespace lumen
