// Dequantization against llama.cpp: every tensor of every file in shared/models/quant/ is
// dequantized with lumen's reference to_float and compared with reference/quant/dequant.json
// (sum and sum of squares, first 8 values bit for bit) and, for blk.0.attn_q.weight, with the
// full dequantized tensor that ggml produced (bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf_file.h"
#include "test_support.h"

namespace lumen {
namespace {

std::vector<float> dequantize(const GgufTensorInfo& t) {
  const TypeTraits& tr = type_traits(t.type);
  EXPECT_NE(tr.to_float, nullptr) << t.name << ": no to_float for " << tr.name;
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  if (tr.to_float == nullptr) return out;
  const size_t row_bytes = row_size(t.type, t.ne[0]);
  for (int64_t r = 0; r < t.n_rows(); r++)
    tr.to_float(t.data + r * row_bytes, out.data() + r * t.ne[0], t.ne[0]);
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class DequantGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DequantGolden, MatchesGgml) {
  const std::string file = GetParam();
  if (!test::shared_exists("reference/quant/dequant.json") || !test::shared_exists("models/quant/" + file))
    GTEST_SKIP() << "shared data missing: " << test::shared_path("models/quant/" + file);
  const nlohmann::json ref =
      nlohmann::json::parse(test::read_file(test::shared_path("reference/quant/dequant.json")));
  ASSERT_TRUE(ref.contains(file)) << file;
  const nlohmann::json& tensors = ref[file]["tensors"];

  auto gguf = GgufFile::open(test::shared_path("models/quant/" + file));
  ASSERT_EQ(gguf->tensors().size(), tensors.size()) << file;
  for (const GgufTensorInfo& t : gguf->tensors()) {
    SCOPED_TRACE(file + ": " + t.name);
    ASSERT_TRUE(tensors.contains(t.name));
    const nlohmann::json& e = tensors[t.name];
    EXPECT_EQ(e["type"].get<std::string>(), std::string(type_name(t.type)));
    const std::vector<float> v = dequantize(t);
    double sum = 0.0;
    double sum_sq = 0.0;
    for (float x : v) {
      sum += x;
      sum_sq += static_cast<double>(x) * x;
    }
    const double ref_sum = e["sum"].get<double>();
    const double ref_sum_sq = e["sum_sq"].get<double>();
    // Only summation order differs (numpy sums pairwise), so the bounds are tight: the sum is
    // compared relative to the sum of magnitudes' scale sqrt(n * sum_sq) as it may be near 0.
    EXPECT_NEAR(sum, ref_sum, 1e-9 * std::max(std::fabs(ref_sum), std::sqrt(ref_sum_sq)));
    EXPECT_NEAR(sum_sq, ref_sum_sq, 1e-9 * ref_sum_sq);
    const auto& first8 = e["first8"];
    ASSERT_EQ(first8.size(), 8u);
    for (size_t i = 0; i < 8; i++)
      EXPECT_EQ(bits(v[i]), bits(static_cast<float>(first8[i].get<double>()))) << "element " << i;

    if (t.name == "blk.0.attn_q.weight") {
      const std::string stem = file.substr(0, file.size() - 5);  // drop ".gguf"
      const std::string raw = test::read_file(
          test::shared_path("reference/quant/" + stem + ".blk.0.attn_q.weight.f32"));
      ASSERT_EQ(raw.size(), v.size() * sizeof(float));
      size_t n_diff = 0;
      size_t first_diff = 0;
      for (size_t i = 0; i < v.size(); i++) {
        float r;
        std::memcpy(&r, raw.data() + i * 4, 4);
        if (bits(r) != bits(v[i]) && n_diff++ == 0) first_diff = i;
      }
      EXPECT_EQ(n_diff, 0u) << "first difference at element " << first_diff;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllFiles, DequantGolden,
    ::testing::Values("small256-BF16.gguf", "small256-F16.gguf", "small256-IQ4_NL.gguf",
                      "small256-Q2_K.gguf", "small256-Q3_K_M.gguf", "small256-Q4_0.gguf",
                      "small256-Q4_1.gguf", "small256-Q4_K_M-mix.gguf", "small256-Q4_K_M.gguf",
                      "small256-Q5_0.gguf", "small256-Q5_1.gguf", "small256-Q5_K_M.gguf",
                      "small256-Q6_K.gguf", "small256-Q8_0.gguf"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string s = info.param.substr(9, info.param.size() - 9 - 5);  // drop "small256-", ".gguf"
      for (char& c : s)
        if (c == '-') c = '_';
      return s;
    });

}  // namespace
}  // namespace lumen
