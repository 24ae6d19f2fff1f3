// The per-ISA element-wise ops (kernels/ops_isa.h) against the scalar references: RMSNorm and
// softmax and SwiGLU within float rounding (their SIMD exp is a polynomial), RoPE, vec_add and
// argmax bit for bit, over lengths with tails and the edge values of exp's range.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "core/dtype.h"
#include "core/quant/quant_ref.h"
#include "kernels/ops.h"
#include "kernels/ops_isa.h"
#include "kernels/ref/ops_ref.h"

namespace lumen {
namespace {

// The SIMD tables this CPU runs (and the scalar one: the conversions compare all three with
// core's converters).
std::vector<const OpsTable*> tables(bool with_scalar = false) {
  std::vector<const OpsTable*> v;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa, cpu_features())) v.push_back(&ops_table(isa));
  if (with_scalar) v.push_back(&ops_table(Isa::Scalar));
  return v;
}

std::vector<float> randn(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

const int64_t kLengths[] = {1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 100, 576, 2048, 5631};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs_tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::fabs(got[i] - want[i]), rel * std::fabs(want[i]) + abs_tol)
        << what << " n " << got.size() << " at " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(Ops, RmsNormMatchesReference) {
  for (const OpsTable* t : tables()) {
    SCOPED_TRACE(t->name);
    for (int64_t n : kLengths) {
      const auto x = randn(n, static_cast<uint32_t>(n), 3.0f);
      const auto w = randn(n, static_cast<uint32_t>(n + 1));
      for (bool with_w : {true, false}) {
        std::vector<float> want(n), got(n);
        ref::rms_norm(x.data(), with_w ? w.data() : nullptr, want.data(), n, 1e-5f);
        t->rms_norm(x.data(), with_w ? w.data() : nullptr, got.data(), n, 1e-5f);
        expect_close(got, want, 1e-6, 0.0, "rms_norm");
        std::vector<float> in_place = x;  // y may alias x (per-head norms do that)
        t->rms_norm(in_place.data(), with_w ? w.data() : nullptr, in_place.data(), n, 1e-5f);
        EXPECT_EQ(in_place, got);
      }
    }
  }
}

// A table's rope at position pos, by the angles the forward pass computes once per token.
void rope_at(const OpsTable& t, float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const RopeParams& p) {
  std::vector<float> angles(static_cast<size_t>(p.n_rot));
  rope_angles(pos, p, angles.data(), angles.data() + p.n_rot / 2);
  t.rope(x, n_heads, head_dim, p, angles.data(), angles.data() + p.n_rot / 2);
}

// Every table's rotation gives the reference's bits, rotary dims of a head or fewer, pairs NEOX
// or adjacent, with frequency factors; head dims above 512 take the reference's path.
TEST(Ops, RopeIsBitIdentical) {
  const auto factors = randn(512, 5);
  std::vector<float> ff(512);
  for (size_t i = 0; i < ff.size(); i++) ff[i] = 1.0f + std::fabs(factors[i]);
  for (const OpsTable* t : tables()) {
    SCOPED_TRACE(t->name);
    for (int64_t head_dim : {2, 6, 16, 18, 64, 80, 128, 256, 1024})
      for (int64_t n_rot : {head_dim, head_dim / 2 - (head_dim / 2) % 2})
        for (bool neox : {false, true})
          for (int32_t pos : {0, 1, 17, 1000, 100000})
            for (bool with_factors : {false, true}) {
              if (n_rot == 0) continue;
              RopeParams p;
              p.n_rot = n_rot;
              p.freq_base = 10000.0f;
              p.freq_scale = with_factors ? 0.25f : 1.0f;
              p.neox = neox;
              p.freq_factors = with_factors ? ff.data() : nullptr;
              const int64_t n_heads = 3;
              const auto x = randn(n_heads * head_dim, static_cast<uint32_t>(head_dim + pos));
              std::vector<float> want = x, got = x;
              ref::rope(want.data(), n_heads, head_dim, pos, p);
              rope_at(*t, got.data(), n_heads, head_dim, pos, p);
              ASSERT_EQ(got, want) << "head_dim " << head_dim << " n_rot " << n_rot << " neox " << neox << " pos " << pos;
            }
  }
}

// YaRN (ggml's rope_yarn): bit-identical per ISA, pairs below the ramp unscaled, pairs above it
// interpolated (freq_scale), cos and sin times mscale = 1 + 0.1 ln(1 / freq_scale).
TEST(Ops, RopeYarn) {
  RopeParams p;
  p.n_rot = 64;
  p.freq_base = 10000.0f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  yarn_corr_dims(64, 4096, 10000.0f, 32.0f, 1.0f, &p.yarn_low, &p.yarn_high);
  EXPECT_EQ(p.yarn_low, 10.0f);  // ../shared/reference's synth-llama-yarn: corr_dims [10, 23]
  EXPECT_EQ(p.yarn_high, 23.0f);
  const int32_t pos = 1234;
  std::vector<float> c(32), s(32);
  ref::rope_angles(pos, p, c.data(), s.data());
  const double mscale = 1.0 + 0.1 * std::log(4.0);
  for (int i : {0, 5, 10, 23, 31}) {
    const double theta_ext = pos * std::pow(10000.0, -2.0 * i / 64.0);
    const double ramp = 1.0 - std::clamp((i - 10.0) / 13.0, 0.0, 1.0);
    const double theta = 0.25 * theta_ext * (1.0 - ramp) + theta_ext * ramp;
    EXPECT_NEAR(c[i], std::cos(theta) * mscale, 2e-3) << "pair " << i;
    EXPECT_NEAR(s[i], std::sin(theta) * mscale, 2e-3) << "pair " << i;
  }
  for (const OpsTable* t : tables())
    for (bool neox : {false, true}) {
      p.neox = neox;
      const auto x = randn(3 * 64, 7);
      std::vector<float> want = x, got = x;
      ref::rope(want.data(), 3, 64, pos, p);
      rope_at(*t, got.data(), 3, 64, pos, p);
      EXPECT_EQ(got, want) << t->name << " neox " << neox;
    }
}

TEST(Ops, SoftmaxMatchesReference) {
  for (const OpsTable* t : tables()) {
    SCOPED_TRACE(t->name);
    for (int64_t n : kLengths) {
      for (float sd : {1.0f, 30.0f}) {
        auto x = randn(n, static_cast<uint32_t>(n * 3), sd);
        if (n > 3) x[n / 2] = -std::numeric_limits<float>::infinity();  // a masked entry
        std::vector<float> want = x, got = x;
        ref::softmax(want.data(), n);
        t->softmax(got.data(), n);
        expect_close(got, want, 1e-6, 1e-12, "softmax");
      }
    }
  }
}

// GeGLU as ggml's F16 GELU table: SIMD and reference agree up to one F16 rounding of the GELU
// (their tanh may differ in the last bits), and at the table's edges exactly.
TEST(Ops, GegluMatchesReference) {
  std::vector<float> edge = {0.0f, -0.0f, 1e-30f, 9.99f, 10.0f, 10.5f, -9.99f, -10.0f, -10.5f, 100.0f, -100.0f};
  for (float v = -12.0f; v <= 12.0f; v += 0.013f) edge.push_back(v);
  for (const OpsTable* t : tables()) {
    SCOPED_TRACE(t->name);
    for (int64_t n : kLengths) {
      const auto g = randn(n, static_cast<uint32_t>(n + 19), 3.0f);
      const auto u = randn(n, static_cast<uint32_t>(n + 20));
      std::vector<float> want(n), got(n);
      ref::geglu(g.data(), u.data(), want.data(), n);
      t->geglu(g.data(), u.data(), got.data(), n);
      expect_close(got, want, 1e-3, 1e-6, "geglu");
    }
    const int64_t n = static_cast<int64_t>(edge.size());
    std::vector<float> ones(n, 1.0f), want(n), got(n);
    ref::geglu(edge.data(), ones.data(), want.data(), n);
    t->geglu(edge.data(), ones.data(), got.data(), n);
    expect_close(got, want, 1e-3, 1e-6, "geglu edges");
    for (size_t i = 0; i < edge.size(); i++) {
      if (edge[i] >= 10.0f || edge[i] <= -10.0f) {
        EXPECT_EQ(got[i], edge[i] >= 10.0f ? edge[i] : 0.0f) << edge[i];
      }
    }
  }
  // The F16 table's value at 1: tanh-GELU(1) = 0.84119 (erf-GELU would be 0.84134), rounded to F16.
  float one = 1.0f, up = 1.0f, y = 0.0f;
  ref::geglu(&one, &up, &y, 1);
  EXPECT_EQ(y, fp16_to_fp32(fp32_to_fp16(0.5f * (1.0f + std::tanh(0.7978845608f * 1.044715f)))));
  EXPECT_NEAR(y, 0.84119, 5e-4);
}

// Soft-capping (Gemma 2's logits): within a few 1e-7 of cap * tanhf, the saturated ends and
// infinities at +-cap, a NaN kept.
TEST(Ops, SoftCapMatchesReference) {
  std::vector<float> edge = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-4f, 269.9f, 270.1f, -270.1f, 1e6f, -1e6f,
                             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (float v = -400.0f; v <= 400.0f; v += 0.77f) edge.push_back(v);
  for (const OpsTable* t : tables()) {
    SCOPED_TRACE(t->name);
    for (float cap : {30.0f, 50.0f}) {
      for (int64_t n : kLengths) {
        const auto x = randn(n, static_cast<uint32_t>(n + 29), 20.0f);
        std::vector<float> want = x, got = x;
        ref::soft_cap(want.data(), n, cap);
        t->soft_cap(got.data(), n, cap);
        expect_close(got, want, 1e-5, 1e-6 * cap, "soft_cap");
      }
      std::vector<float> want = edge, got = edge;
      ref::soft_cap(want.data(), static_cast<int64_t>(edge.size()), cap);
      t->soft_cap(got.data(), static_cast<int64_t>(edge.size()), cap);
      expect_close(got, want, 1e-5, 1e-6 * cap, "soft_cap edges");
      EXPECT_EQ(got[10], cap);  // +-inf
      EXPECT_EQ(got[11], -cap);
    }
    float nan = std::numeric_limits<float>::quiet_NaN();
    t->soft_cap(&nan, 1, 30.0f);
    EXPECT_TRUE(std::isnan(nan));
  }
}

TEST(Ops, SwigluMatchesReference) {
  std::vector<float> edge = {0.0f, -0.0f, 1e-30f, -1e-30f, 80.0f, -80.0f, 87.0f, -87.0f, 88.5f, -88.5f,
                             88.8f, -88.8f, 100.0f, -100.0f, 104.0f, -104.0f, 1e6f, -1e6f, 20.5f, -20.5f};
  for (float v = -110.0f; v <= 110.0f; v += 0.37f) edge.push_back(v);
  for (const OpsTable* t : tables()) {
    SCOPED_TRACE(t->name);
    for (int64_t n : kLengths) {
      const auto g = randn(n, static_cast<uint32_t>(n + 9), 4.0f);
      const auto u = randn(n, static_cast<uint32_t>(n + 10));
      std::vector<float> want(n), got(n);
      ref::swiglu(g.data(), u.data(), want.data(), n);
      t->swiglu(g.data(), u.data(), got.data(), n);
      expect_close(got, want, 1e-6, 1e-30, "swiglu");
    }
    // exp over its whole range, through silu: gate values from -110 to 110.
    const int64_t n = static_cast<int64_t>(edge.size());
    std::vector<float> ones(n, 1.0f), want(n), got(n);
    ref::swiglu(edge.data(), ones.data(), want.data(), n);
    t->swiglu(edge.data(), ones.data(), got.data(), n);
    expect_close(got, want, 1e-6, 1e-37, "swiglu edges");
  }
}

TEST(Ops, VecAddIsExact) {
  for (const OpsTable* t : tables()) {
    for (int64_t n : kLengths) {
      const auto a = randn(n, 1), b = randn(n, 2);
      std::vector<float> want(n), got(n);
      ref::vec_add(a.data(), b.data(), want.data(), n);
      t->vec_add(a.data(), b.data(), got.data(), n);
      EXPECT_EQ(got, want) << t->name;
      std::vector<float> in_place = a;
      t->vec_add(in_place.data(), b.data(), in_place.data(), n);
      EXPECT_EQ(in_place, want) << t->name;
    }
  }
}

// The index the scalar scan gives, on random logits at every tail length, with the maximum
// repeated (the first copy wins), NaNs anywhere (skipped; a NaN first wins), every value -inf,
// and signed zeros.
TEST(Ops, ArgmaxIsTheScan) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const OpsTable* t : tables()) {
    for (int64_t n : kLengths) {
      auto x = randn(n, 3);
      EXPECT_EQ(t->argmax(x.data(), n), ref::argmax(x.data(), n)) << t->name << " n=" << n;
      const int64_t at = ref::argmax(x.data(), n);
      for (int64_t dup : {int64_t{0}, n / 3, n - 1}) {
        auto y = x;
        y[dup] = x[at];
        EXPECT_EQ(t->argmax(y.data(), n), ref::argmax(y.data(), n)) << t->name << " tie at " << dup;
      }
      for (int64_t k : {int64_t{0}, n / 2, n - 1}) {
        auto y = x;
        y[k] = nan;
        if (n > 1 && k == n / 2) y[at] = nan;  // the maximum itself a NaN
        EXPECT_EQ(t->argmax(y.data(), n), ref::argmax(y.data(), n)) << t->name << " NaN at " << k;
      }
      std::vector<float> banned(n, -inf);
      EXPECT_EQ(t->argmax(banned.data(), n), 0) << t->name;
      std::vector<float> zeros(n, -0.0f);
      zeros[n - 1] = 0.0f;
      EXPECT_EQ(t->argmax(zeros.data(), n), ref::argmax(zeros.data(), n)) << t->name;
    }
  }
}

// F16 / BF16 rounding bit for bit, over random bit patterns (NaNs, infinities, subnormals of
// every width), exact ties and the edges of F16's range, at every tail length; the scalar
// converters of core/dtype.h are the reference.
TEST(Ops, HalfConversionsAreBitExact) {
  std::vector<float> x;
  std::mt19937 rng(7);
  for (int i = 0; i < 4096; i++) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                        0xff800001u, 0x7fffffffu, 0xffffffffu, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x33000000u,
                        0x33000001u, 0x387fe000u, 0x38800000u, 0x3f801000u, 0x3f803000u, 0x3f808000u, 0x3f818000u})
    x.push_back(std::bit_cast<float>(bits));
  for (float f : randn(1000, 5, 1e-5f)) x.push_back(f);  // F16 subnormals
  for (float f : randn(1000, 6, 3e4f)) x.push_back(f);   // near F16's overflow
  const std::vector<const OpsTable*> all = tables(/*with_scalar=*/true);
  for (const OpsTable* t : all) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{15}, int64_t{17}, static_cast<int64_t>(x.size())}) {
      for (bool bf16 : {false, true}) {
        std::vector<uint16_t> got(n + 1, 0xabcd);
        (bf16 ? t->to_bf16 : t->to_f16)(x.data(), got.data(), n);
        for (int64_t i = 0; i < n; i++) {
          const uint16_t want = bf16 ? fp32_to_bf16(x[i]) : fp32_to_fp16(x[i]);
          ASSERT_EQ(got[i], want) << t->name << (bf16 ? " bf16 " : " f16 ") << std::hex << std::bit_cast<uint32_t>(x[i]);
        }
        EXPECT_EQ(got[n], 0xabcd) << t->name << ": wrote past the end";
      }
    }
  }
}

// Q8_0 blocks (the Q8_0 KV cache's store) bit for bit from_float_q8_0: random rows, ties of
// the scaled values, an all-zero block, huge and tiny magnitudes.
TEST(Ops, Q8_0BlocksAreBitExact) {
  std::vector<float> x = randn(32 * 40, 9);
  for (int j = 0; j < 32; j++) x[32 + j] = 0.0f;                      // block 1: zeros
  for (int j = 0; j < 32; j++) x[64 + j] = 0.5f * static_cast<float>(j - 16);  // ties after scaling
  for (int j = 0; j < 32; j++) x[96 + j] *= 1e30f;
  for (int j = 0; j < 32; j++) x[128 + j] *= 1e-30f;
  const std::vector<const OpsTable*> all = tables(/*with_scalar=*/true);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> want(n / 32 * 34);
  from_float_q8_0(x.data(), want.data(), n);
  for (const OpsTable* t : all) {
    std::vector<uint8_t> got(want.size() + 1, 0xab);
    t->to_q8_0(x.data(), got.data(), n);
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end() - 1), want) << t->name;
    EXPECT_EQ(got.back(), 0xab) << t->name << ": wrote past the end";
  }
}

// The public functions run the active ISA's table.
TEST(Ops, PublicFunctionsUseTheActiveTable) {
  const OpsTable& t = ops_table(active_isa());
  const auto x = randn(100, 3), w = randn(100, 4);
  std::vector<float> a(100), b(100);
  rms_norm(x.data(), w.data(), a.data(), 100, 1e-6f);
  t.rms_norm(x.data(), w.data(), b.data(), 100, 1e-6f);
  EXPECT_EQ(a, b);
  a = x;
  b = x;
  softmax(a.data(), 100);
  t.softmax(b.data(), 100);
  EXPECT_EQ(a, b);
  swiglu(x.data(), w.data(), a.data(), 100);
  t.swiglu(x.data(), w.data(), b.data(), 100);
  EXPECT_EQ(a, b);
  vec_add(x.data(), w.data(), a.data(), 100);
  t.vec_add(x.data(), w.data(), b.data(), 100);
  EXPECT_EQ(a, b);
  EXPECT_STREQ(ops_table(Isa::Scalar).name, "scalar");
}

}  // namespace
}  // namespace lumen
