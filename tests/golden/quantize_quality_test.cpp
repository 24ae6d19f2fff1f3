// `lumen quantize` against llama-quantize: quantizes the F32 small256 model (the source of
// shared/models/quant/, regenerated with synth_gguf.py) through the CLI, for each type, and
// checks that every 2-D weight's RMS error against F32 is at most 1.02x that of the same tensor
// in the llama-quantize file, that the tensor types match that file's (the Q4_K_M mix included)
// and that the result loads and generates (`lumen run -n 4`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf_file.h"
#include "quantize/model_quantizer.h"
#include "test_support.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;
constexpr const char* kF32Sha = "aa0c4d1354ab3ffab0017bba2be56275f9165ecc08efb23508ad11cbf2cc7b62";

struct Case {
  const char* type;      // lumen quantize TYPE
  const char* ref_file;  // models/quant/ file made by llama-quantize
  int64_t file_type;     // general.file_type lumen writes
};

std::vector<float> dequantize(const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  const size_t rs = row_size(t.type, t.ne[0]);
  for (int64_t r = 0; r < t.n_rows(); r++) type_traits(t.type).to_float(t.data + r * rs, out.data() + r * t.ne[0], t.ne[0]);
  return out;
}

double rms_error(const std::vector<float>& a, const float* ref) {
  double e = 0;
  for (size_t i = 0; i < a.size(); i++) e += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
  return std::sqrt(e / static_cast<double>(a.size()));
}

class QuantizeQuality : public ::testing::TestWithParam<Case> {
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
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lumen_quant_quality_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string f32_path_;
  static std::string why_;
  fs::path dir_;
};
std::string QuantizeQuality::f32_path_;
std::string QuantizeQuality::why_;

TEST_P(QuantizeQuality, AsGoodAsLlamaQuantize) {
  const Case c = GetParam();
  if (f32_path_.empty()) GTEST_SKIP() << why_;
  // Under the sanitizers, one legacy type and the mix (the K-quant search is the slow part).
  if (test::sanitized_build() && std::string(c.type) != "Q8_0" && std::string(c.type) != "Q4_K_M")
    GTEST_SKIP() << "sanitized build: only Q8_0 and Q4_K_M";
  const std::string ref_rel = std::string("models/quant/") + c.ref_file;
  if (!test::shared_exists(ref_rel)) GTEST_SKIP() << "missing: " << ref_rel;
  const std::string out = (dir_ / (std::string(c.type) + ".gguf")).string();
  auto r = test::run_cli("quantize '" + f32_path_ + "' '" + out + "' " + c.type + " -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto src = GgufFile::open(f32_path_);
  auto ref = GgufFile::open(test::shared_path(ref_rel));
  auto mine = GgufFile::open(out);
  EXPECT_EQ(mine->get_int("general.file_type"), c.file_type);
  EXPECT_EQ(mine->get_int("general.quantization_version"), 2);
  ASSERT_EQ(mine->tensors().size(), src->tensors().size());
  int n_checked = 0;
  for (const GgufTensorInfo& st : src->tensors()) {
    SCOPED_TRACE(std::string(c.type) + ": " + st.name);
    const GgufTensorInfo* mt = mine->find_tensor(st.name);
    const GgufTensorInfo* rt = ref->find_tensor(st.name);
    ASSERT_NE(mt, nullptr);
    ASSERT_NE(rt, nullptr);
    EXPECT_EQ(type_name(mt->type), type_name(rt->type)) << "type assignment differs from llama-quantize's";
    if (st.n_dims < 2) {
      EXPECT_EQ(mt->type, GgmlType::F32);
      continue;
    }
    if (mt->type != rt->type) continue;
    const auto* x = reinterpret_cast<const float*>(st.data);
    const double e_mine = rms_error(dequantize(*mt), x);
    const double e_ref = rms_error(dequantize(*rt), x);
    EXPECT_LE(e_mine, 1.02 * e_ref) << "lumen RMS " << e_mine << " vs llama-quantize " << e_ref;
    n_checked++;
  }
  EXPECT_GE(n_checked, 16);

  auto run = test::run_cli("run -m '" + out + "' -t 2 -p 'Once upon a time' -n 4 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\"tokens\":["), std::string::npos) << run.out;
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeQuality,
                         ::testing::Values(Case{"Q8_0", "small256-Q8_0.gguf", 7}, Case{"Q4_0", "small256-Q4_0.gguf", 2},
                                           Case{"Q4_1", "small256-Q4_1.gguf", 3}, Case{"Q5_0", "small256-Q5_0.gguf", 8},
                                           Case{"Q5_1", "small256-Q5_1.gguf", 9},
                                           Case{"Q4_K", "small256-Q4_K_M.gguf", 14},
                                           Case{"Q5_K", "small256-Q5_K_M.gguf", 16},
                                           Case{"Q6_K", "small256-Q6_K.gguf", 18},
                                           Case{"Q4_K_M", "small256-Q4_K_M-mix.gguf", 15}),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.type); });

// The Q4_K_M plan on its own (no CLI): exactly the types llama-quantize chose for the mix file.
TEST(QuantizePlan, Q4_K_MReproducesTheLlamaQuantizeMix) {
  if (!test::shared_exists("models/quant/small256-Q4_K_M-mix.gguf")) GTEST_SKIP() << "no shared models";
  auto ref = GgufFile::open(test::shared_path("models/quant/small256-Q4_K_M-mix.gguf"));
  const auto target = parse_quant_target("q4_k_m");
  ASSERT_TRUE(target.has_value());
  // Planning from the quantized file itself: only names, shapes and order matter to the rules.
  const std::vector<TensorPlan> plan = plan_quantization(*ref, *target);
  ASSERT_EQ(plan.size(), ref->tensors().size());
  int n_q6 = 0;
  for (size_t i = 0; i < plan.size(); i++) {
    EXPECT_EQ(type_name(plan[i].dst_type), type_name(ref->tensors()[i].type)) << plan[i].name;
    EXPECT_EQ(plan[i].note, "") << plan[i].name;
    n_q6 += plan[i].dst_type == GgmlType::Q6_K;
  }
  EXPECT_EQ(n_q6, 3);  // output, blk.1.attn_v, blk.1.ffn_down
}

TEST(QuantizePlan, UseMoreBitsFollowsLlamaCpp) {
  // TinyLlama's 22 layers: the layers llama-quantize gives Q6_K attn_v / ffn_down in Q4_K_M.
  std::vector<int> more;
  for (int i = 0; i < 22; i++)
    if (use_more_bits(i, 22)) more.push_back(i);
  EXPECT_EQ(more, (std::vector<int>{0, 1, 4, 7, 10, 13, 16, 19, 20, 21}));
  EXPECT_FALSE(use_more_bits(0, 2));
  EXPECT_TRUE(use_more_bits(1, 2));
  EXPECT_TRUE(use_more_bits(0, 1));
}

TEST(QuantizePlan, TargetNames) {
  for (const char* t : {"Q8_0", "q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "q5_k_m", "F16"})
    EXPECT_TRUE(parse_quant_target(t).has_value()) << t;
  for (const char* t : {"", "Q4", "Q4_K_S", "Q8_1", "Q8_K", "q4_k_mm"}) EXPECT_FALSE(parse_quant_target(t).has_value()) << t;
  const auto m = parse_quant_target("Q4_K_M");
  EXPECT_TRUE(m->mix);
  EXPECT_EQ(m->base, GgmlType::Q4_K);
  EXPECT_EQ(m->file_type, 15u);
}

}  // namespace
}  // namespace lumen
