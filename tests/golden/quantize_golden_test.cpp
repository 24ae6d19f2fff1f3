// lumen's weight quantizers against llama-quantize: quantizes the F32 source of the
// shared/models/quant/ files (generated with synth_gguf.py) with weight_quantizer() and checks
// that the RMS error against F32 is at most 1.02x that of the reference file's weights. The
// quantizers follow ggml's reference quantizers exactly, so the bytes are also expected to be
// identical; that is checked too, to catch drift in the search (a near-tie could in principle
// flip on another compiler, so the RMS bound is the primary requirement).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quant/quant_ref.h"
#include "gguf/gguf_file.h"
#include "test_support.h"

namespace lumen {
namespace {

constexpr const char* kF32Sha = "aa0c4d1354ab3ffab0017bba2be56275f9165ecc08efb23508ad11cbf2cc7b62";

std::vector<float> dequantize(GgmlType t, const uint8_t* data, int64_t n_rows, int64_t n_cols) {
  std::vector<float> out(static_cast<size_t>(n_rows * n_cols));
  const size_t rs = row_size(t, n_cols);
  for (int64_t r = 0; r < n_rows; r++) type_traits(t).to_float(data + r * rs, out.data() + r * n_cols, n_cols);
  return out;
}

class QuantizeGolden : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    if (!test::shared_exists("models/stories260K.gguf")) {
      why_ = "shared data missing: " + test::shared_path("models/stories260K.gguf");
      return;
    }
    f32_path_ = test::synth_model(
        "small256-f32.gguf",
        "--preset small256 --type f32 --vocab-from '" + test::shared_path("models/stories260K.gguf") + "' --seed 0",
        kF32Sha, &why_);
  }
  static std::string f32_path_;
  static std::string why_;
};
std::string QuantizeGolden::f32_path_;
std::string QuantizeGolden::why_;

TEST_P(QuantizeGolden, MatchesLlamaQuantize) {
  const std::string file = GetParam();
  if (f32_path_.empty()) GTEST_SKIP() << why_;
  if (!test::shared_exists("models/quant/" + file)) GTEST_SKIP() << "missing: models/quant/" << file;
  auto src = GgufFile::open(f32_path_);
  auto ref = GgufFile::open(test::shared_path("models/quant/" + file));
  int n_checked = 0;
  for (const GgufTensorInfo& rt : ref->tensors()) {
    if (rt.type == GgmlType::F32) continue;
    SCOPED_TRACE(file + ": " + rt.name + " (" + std::string(type_name(rt.type)) + ")");
    const FromFloatFn quantize = weight_quantizer(rt.type);
    ASSERT_NE(quantize, nullptr);
    const GgufTensorInfo* st = src->find_tensor(rt.name);
    ASSERT_NE(st, nullptr);
    ASSERT_EQ(st->type, GgmlType::F32);
    ASSERT_EQ(st->n_elements(), rt.n_elements());
    const int64_t n_cols = rt.ne[0];
    // Under the sanitizers, check the first rows only (the search is the slow part).
    const int64_t n_rows = test::sanitized_build() ? std::min<int64_t>(rt.n_rows(), 16) : rt.n_rows();
    const auto* x = reinterpret_cast<const float*>(st->data);

    std::vector<uint8_t> q(row_size(rt.type, n_cols) * n_rows);
    const size_t rs = row_size(rt.type, n_cols);
    for (int64_t r = 0; r < n_rows; r++) quantize(x + r * n_cols, q.data() + r * rs, n_cols);
    ASSERT_LE(q.size(), rt.n_bytes);

    const std::vector<float> mine = dequantize(rt.type, q.data(), n_rows, n_cols);
    const std::vector<float> theirs = dequantize(rt.type, rt.data, n_rows, n_cols);
    double err_mine = 0, err_theirs = 0;
    for (size_t i = 0; i < mine.size(); i++) {
      err_mine += (static_cast<double>(mine[i]) - x[i]) * (static_cast<double>(mine[i]) - x[i]);
      err_theirs += (static_cast<double>(theirs[i]) - x[i]) * (static_cast<double>(theirs[i]) - x[i]);
    }
    const double rms_mine = std::sqrt(err_mine / mine.size());
    const double rms_theirs = std::sqrt(err_theirs / mine.size());
    EXPECT_LE(rms_mine, 1.02 * rms_theirs) << "lumen RMS " << rms_mine << " vs llama-quantize " << rms_theirs;

    int64_t n_diff_rows = 0;
    for (int64_t r = 0; r < n_rows; r++)
      if (std::memcmp(q.data() + r * rs, rt.data + r * rs, rs) != 0) n_diff_rows++;
    EXPECT_EQ(n_diff_rows, 0) << "rows differing from llama-quantize's bytes, of " << n_rows;
    n_checked++;
  }
  EXPECT_GT(n_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(
    AllFiles, QuantizeGolden,
    ::testing::Values("small256-BF16.gguf", "small256-F16.gguf", "small256-IQ4_NL.gguf",
                      "small256-Q2_K.gguf", "small256-Q3_K_M.gguf", "small256-Q4_0.gguf",
                      "small256-Q4_1.gguf", "small256-Q4_K_M-mix.gguf", "small256-Q4_K_M.gguf",
                      "small256-Q5_0.gguf", "small256-Q5_1.gguf", "small256-Q5_K_M.gguf",
                      "small256-Q6_K.gguf", "small256-Q8_0.gguf"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string s = info.param.substr(9, info.param.size() - 9 - 5);
      for (char& c : s)
        if (c == '-') c = '_';
      return s;
    });

}  // namespace
}  // namespace lumen
