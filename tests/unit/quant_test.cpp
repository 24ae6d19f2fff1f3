// Scalar reference quantizers, dequantizers and dot products (core/quant): round-trip error
// bounds, dot products against dequantized data, half-precision edge cases and the exact
// rounding rules that llama.cpp's results depend on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"

namespace lumen {
namespace {

using namespace quant;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> quantize(GgmlType t, const std::vector<float>& x) {
  const TypeTraits& tr = type_traits(t);
  std::vector<uint8_t> q(row_size(t, static_cast<int64_t>(x.size())));
  tr.from_float(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(GgmlType t, const void* q, size_t n) {
  std::vector<float> y(n);
  type_traits(t).to_float(q, y.data(), static_cast<int64_t>(n));
  return y;
}

// ---- round trips ----

// Largest allowed |x - dequant(quant(x))| for one block, given the block's values.
using BoundFn = double (*)(const float* x, int n);

double absmax(const float* x, int n) {
  double m = 0;
  for (int i = 0; i < n; i++) m = std::max(m, static_cast<double>(std::fabs(x[i])));
  return m;
}
double range(const float* x, int n) {
  return *std::max_element(x, x + n) - static_cast<double>(*std::min_element(x, x + n));
}
// F16 rounding of the scale moves the outermost level by up to 2^-11 relative; allow 2^-10.
constexpr double kHalf = 1.0 / 1024;

struct RoundTripCase {
  GgmlType type;
  BoundFn bound;
};

const RoundTripCase kRoundTrips[] = {
    // Symmetric formats with d = max/-8 (-16): the opposite extreme is clamped a full step.
    {GgmlType::Q4_0, [](const float* x, int n) { return absmax(x, n) / 8 * (1 + kHalf) + absmax(x, n) * kHalf; }},
    {GgmlType::Q5_0, [](const float* x, int n) { return absmax(x, n) / 16 * (1 + kHalf) + absmax(x, n) * kHalf; }},
    // Affine formats: half a step, plus the F16 rounding of d and m.
    {GgmlType::Q4_1, [](const float* x, int n) { return range(x, n) / 15 * 0.5 + (absmax(x, n) + range(x, n)) * kHalf; }},
    {GgmlType::Q5_1, [](const float* x, int n) { return range(x, n) / 31 * 0.5 + (absmax(x, n) + range(x, n)) * kHalf; }},
    {GgmlType::Q8_0, [](const float* x, int n) { return absmax(x, n) / 127 * 0.5 + absmax(x, n) * kHalf; }},
    {GgmlType::Q8_1, [](const float* x, int n) { return absmax(x, n) / 127 * 0.5 + absmax(x, n) * kHalf; }},
    {GgmlType::Q8_K, [](const float* x, int n) { return absmax(x, n) / 127 * 0.5 * (1 + 1e-6); }},
    {GgmlType::F16, [](const float* x, int n) { return absmax(x, n) / 2048; }},
    {GgmlType::BF16, [](const float* x, int n) { return absmax(x, n) / 256; }},
    {GgmlType::F32, [](const float*, int) { return 0.0; }},
};

TEST(Quant, RoundTripErrorWithinFormatBound) {
  for (const RoundTripCase& c : kRoundTrips) {
    const TypeTraits& tr = type_traits(c.type);
    SCOPED_TRACE(tr.name);
    ASSERT_NE(tr.from_float, nullptr);
    ASSERT_NE(tr.to_float, nullptr);
    const int bs = tr.type_size > 0 && tr.block_size > 1 ? static_cast<int>(tr.block_size) : 32;
    const std::vector<float> x = random_floats(4096, 1 + static_cast<uint32_t>(c.type), 0.02f);
    const std::vector<uint8_t> q = quantize(c.type, x);
    const std::vector<float> y = dequantize(c.type, q.data(), x.size());
    for (size_t b = 0; b < x.size(); b += bs) {
      const double bound = c.bound(&x[b], bs);
      for (int j = 0; j < bs; j++) ASSERT_LE(std::fabs(x[b + j] - y[b + j]), bound) << "element " << b + j;
    }
  }
}

TEST(Quant, ZeroBlocksStayZero) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                     GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F16, GgmlType::BF16}) {
    SCOPED_TRACE(type_name(t));
    const std::vector<float> x(256, 0.0f);
    const std::vector<float> y = dequantize(t, quantize(t, x).data(), x.size());
    for (float v : y) ASSERT_EQ(v, 0.0f);
  }
}

// Formats whose quantizers search for scales: relative RMS error on N(0, 0.02) weights, bounded
// at about 1.2x what ggml's reference quantizers reach (the golden test checks the bytes).
TEST(Quant, SearchingQuantizersRmsError) {
  const struct {
    GgmlType type;
    double max_rel_rms;
  } cases[] = {{GgmlType::Q2_K, 0.35},  {GgmlType::Q3_K, 0.18},  {GgmlType::Q4_K, 0.085},
               {GgmlType::Q5_K, 0.043}, {GgmlType::Q6_K, 0.022}, {GgmlType::IQ4_NL, 0.09}};
  const std::vector<float> x = random_floats(4096, 11, 0.02f);
  double sum_x2 = 0;
  for (float v : x) sum_x2 += static_cast<double>(v) * v;
  for (const auto& c : cases) {
    SCOPED_TRACE(type_name(c.type));
    const FromFloatFn q = weight_quantizer(c.type);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q, type_traits(c.type).from_float);
    std::vector<uint8_t> packed(row_size(c.type, 4096));
    q(x.data(), packed.data(), 4096);
    const std::vector<float> y = dequantize(c.type, packed.data(), x.size());
    double err = 0;
    for (size_t i = 0; i < x.size(); i++) err += (static_cast<double>(x[i]) - y[i]) * (x[i] - y[i]);
    EXPECT_LE(std::sqrt(err / sum_x2), c.max_rel_rms);
  }
}

// Degenerate blocks must not trip the searches (divisions by zero, NaN, int overflow): the
// result is finite and exact where the format can represent the input exactly.
TEST(Quant, WeightQuantizersHandleDegenerateBlocks) {
  const int64_t n = 256;
  std::vector<std::vector<float>> inputs;
  inputs.emplace_back(n, 0.0f);
  inputs.emplace_back(n, 0.5f);
  inputs.emplace_back(n, -3.0f);
  std::vector<float> one_hot(n, 0.0f);
  one_hot[77] = -2.0f;
  inputs.push_back(one_hot);
  std::vector<float> tiny(n, 1e-20f);
  tiny[3] = -1e-30f;
  inputs.push_back(tiny);
  std::vector<float> huge = random_floats(n, 5, 1e30f);
  inputs.push_back(huge);
  for (uint32_t id = 0; id < 64; id++) {
    const TypeTraits* tr = find_type_traits(id);
    if (tr == nullptr || weight_quantizer(tr->type) == nullptr) continue;
    SCOPED_TRACE(tr->name);
    for (size_t k = 0; k < inputs.size(); k++) {
      std::vector<uint8_t> packed(row_size(tr->type, n));
      weight_quantizer(tr->type)(inputs[k].data(), packed.data(), n);
      const std::vector<float> y = dequantize(tr->type, packed.data(), n);
      for (int64_t i = 0; i < n; i++) {
        if (k == 5 && (tr->type == GgmlType::F16 || tr->block_size > 1)) break;  // out of F16 range
        ASSERT_TRUE(std::isfinite(y[i])) << "input " << k << " element " << i;
        if (k == 0) {
          ASSERT_EQ(y[i], 0.0f) << "element " << i;
        }
      }
    }
  }
}

// ---- exact quantizer decisions ----

TEST(Quant, Q8_0ActivationsRoundHalfToEven) {
  // amax = 127 makes 127/amax exactly 1, so x*id is x and the ties are exact.
  std::vector<float> x(32, 0.0f);
  const float in[] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, 1.5f, -0.5f, 2.4f, 2.6f};
  std::copy(std::begin(in), std::end(in), x.begin());
  BlockQ8_0 b;
  from_float_q8_0(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  const int expect[] = {127, 2, 4, -2, -4, 0, 2, 0, 2, 3};
  for (int i = 0; i < 10; i++) EXPECT_EQ(b.qs[i], expect[i]) << "x = " << in[i];

  // Q8_1 rounds the same way; s = d * sum(q) with d before F16 rounding.
  BlockQ8_1 b1;
  from_float_q8_1(x.data(), &b1, 32);
  int sum = 0;
  for (int i = 0; i < 32; i++) {
    EXPECT_EQ(b1.qs[i], b.qs[i]);
    sum += b1.qs[i];
  }
  EXPECT_EQ(fp16_to_fp32(b1.s), fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum))));

  // The weight quantizer is ggml's quantize_row_q8_0_ref: roundf, ties away from zero.
  BlockQ8_0 w;
  from_float_q8_0_weights(x.data(), &w, 32);
  const int expect_w[] = {127, 3, 4, -3, -4, 1, 2, -1, 2, 3};
  for (int i = 0; i < 10; i++) EXPECT_EQ(w.qs[i], expect_w[i]) << "x = " << in[i];
}

TEST(Quant, Q8_0UsesScaleFromAbsMax) {
  std::vector<float> x = random_floats(32, 7, 0.5f);
  x[5] = -3.0f;  // the block's largest magnitude, negative
  BlockQ8_0 b;
  from_float_q8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(3.0f / 127.0f));
  EXPECT_EQ(b.qs[5], -127);
}

TEST(Quant, Q8_KSignTrickAndBsums) {
  std::vector<float> x(256, 0.0f);
  x[0] = -127.0f;  // x_m: iscale = -127/x_m = 1 exactly
  x[1] = 2.5f;     // tie: to even
  x[2] = 3.5f;
  x[3] = 127.0f;   // same magnitude as x_m but later: x_m stays the first
  x[17] = -5.0f;
  BlockQ8_K b;
  from_float_q8_k(x.data(), &b, 256);
  EXPECT_EQ(b.d, 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[3], 127);
  EXPECT_EQ(b.bsums[0], -127 + 2 + 4 + 127);
  EXPECT_EQ(b.bsums[1], -5);
  for (int g = 2; g < 16; g++) EXPECT_EQ(b.bsums[g], 0);

  // The largest magnitude positive: iscale is negative, d negative, values still right.
  std::vector<float> y(256, 0.0f);
  y[9] = 2.0f;
  y[10] = -1.0f;
  from_float_q8_k(y.data(), &b, 256);
  EXPECT_LT(b.d, 0.0f);
  EXPECT_EQ(b.qs[9], -127);
  std::vector<float> back = dequantize(GgmlType::Q8_K, &b, 256);
  EXPECT_FLOAT_EQ(back[9], 2.0f);
  EXPECT_NEAR(back[10], -1.0f, 1.0 / 127);
}

TEST(Quant, Q4_0ReferenceDecisions) {
  // max = -8 (largest magnitude, negative) gives d = 1: q = min(15, trunc(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;
  x[1] = 3.0f;
  x[2] = 7.9f;   // 16.4 -> clamped to 15
  x[3] = -0.5f;  // 8.0 -> 8
  x[16] = 1.5f;  // high nibble of qs[0]: 10
  BlockQ4_0 b;
  from_float_q4_0(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);
  EXPECT_EQ(b.qs[0] >> 4, 10);
  EXPECT_EQ(b.qs[1] & 0x0f, 11);
  EXPECT_EQ(b.qs[2] & 0x0f, 15);
  EXPECT_EQ(b.qs[3] & 0x0f, 8);
}

TEST(Quant, Q5BitLayout) {
  // Q5_0 with d = 1 (max = -16): element j's bit 4 lands in bit j of qh.
  std::vector<float> x(32);
  for (int j = 0; j < 32; j++) x[j] = static_cast<float>((j % 32) - 16);  // q = j
  x[0] = -16.0f;
  BlockQ5_0 b;
  from_float_q5_0(x.data(), &b, 32);
  const uint32_t qh = b.qh[0] | (b.qh[1] << 8) | (b.qh[2] << 16) | (static_cast<uint32_t>(b.qh[3]) << 24);
  EXPECT_EQ(qh, 0xffff0000u);  // q >= 16 exactly for j >= 16
  const std::vector<float> y = dequantize(GgmlType::Q5_0, &b, 32);
  for (int j = 0; j < 32; j++) EXPECT_EQ(y[j], x[j]) << j;
}

// ---- half precision ----

TEST(Quant, Fp16EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  const float in[] = {0.0f, -0.0f, inf, -inf, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 6.0e-8f,
                      -5.9604645e-08f, 6.1035156e-05f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048};
  const uint16_t expect[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0x7bff, 0x7c00, 0x0000, 0x0001,
                             0x8001, 0x0400, 0x3c00, 0x3c02};
  uint16_t out[std::size(in)];
  from_float_f16(in, out, std::size(in));
  for (size_t i = 0; i < std::size(in); i++) EXPECT_EQ(out[i], expect[i]) << in[i];
  const float nan = std::numeric_limits<float>::quiet_NaN();
  from_float_f16(&nan, out, 1);
  EXPECT_EQ(out[0] & 0x7c00, 0x7c00);
  EXPECT_NE(out[0] & 0x03ff, 0);
  float back[std::size(in)];
  to_float_f16(expect, back, std::size(in));
  EXPECT_EQ(back[4], 65504.0f);
  EXPECT_EQ(back[8], 5.9604645e-08f);
  EXPECT_TRUE(std::signbit(back[1]));
  EXPECT_EQ(back[2], inf);
}

TEST(Quant, Bf16EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  float in[] = {0.0f, -0.0f, inf, -inf, 1.0f, 3.0e38f, 0.0f, 0.0f, 1e-40f};
  // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1); 1 + 3*2^-8 -> up to 1 + 2^-6.
  in[6] = 1.0f + 1.0f / 256;
  in[7] = 1.0f + 3.0f / 256;
  const uint16_t expect[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x3f80, 0x7f62, 0x3f80, 0x3f82, 0x0001};
  uint16_t out[std::size(in)];
  from_float_bf16(in, out, std::size(in));
  for (size_t i = 0; i < std::size(in); i++) EXPECT_EQ(out[i], expect[i]) << in[i];
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN()};
  from_float_bf16(nans, out, 2);
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ(out[i] & 0x7f80, 0x7f80);
    EXPECT_NE(out[i] & 0x0040, 0);  // quiet
  }
  float back[std::size(in)];
  to_float_bf16(expect, back, std::size(in));
  EXPECT_EQ(back[4], 1.0f);
  EXPECT_EQ(back[7], 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::signbit(back[1]));
}

// ---- dot products ----

// Random weight blocks: random bits everywhere, then sane random scales in the F16 fields.
std::vector<uint8_t> random_weights(GgmlType t, int64_t n, uint32_t seed) {
  const TypeTraits& tr = type_traits(t);
  std::mt19937 rng(seed);
  std::vector<uint8_t> q(row_size(t, n));
  for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.01f, 0.01f);
  auto f16 = [&] { return fp32_to_fp16(scale(rng)); };
  const int64_t nb = n / tr.block_size;
  for (int64_t i = 0; i < nb; i++) {
    uint8_t* blk = q.data() + i * tr.type_size;
    switch (t) {
      case GgmlType::Q4_0: reinterpret_cast<BlockQ4_0*>(blk)->d = f16(); break;
      case GgmlType::Q5_0: reinterpret_cast<BlockQ5_0*>(blk)->d = f16(); break;
      case GgmlType::Q8_0:
        reinterpret_cast<BlockQ8_0*>(blk)->d = f16();
        for (int8_t& v : reinterpret_cast<BlockQ8_0*>(blk)->qs) v = std::max<int8_t>(v, -127);
        break;
      case GgmlType::IQ4_NL: reinterpret_cast<BlockIQ4_NL*>(blk)->d = f16(); break;
      case GgmlType::Q4_1:
        reinterpret_cast<BlockQ4_1*>(blk)->d = f16();
        reinterpret_cast<BlockQ4_1*>(blk)->m = f16();
        break;
      case GgmlType::Q5_1:
        reinterpret_cast<BlockQ5_1*>(blk)->d = f16();
        reinterpret_cast<BlockQ5_1*>(blk)->m = f16();
        break;
      case GgmlType::Q2_K:
        reinterpret_cast<BlockQ2_K*>(blk)->d = f16();
        reinterpret_cast<BlockQ2_K*>(blk)->dmin = f16();
        break;
      case GgmlType::Q3_K: reinterpret_cast<BlockQ3_K*>(blk)->d = f16(); break;
      case GgmlType::Q4_K:
        reinterpret_cast<BlockQ4_K*>(blk)->d = f16();
        reinterpret_cast<BlockQ4_K*>(blk)->dmin = f16();
        break;
      case GgmlType::Q5_K:
        reinterpret_cast<BlockQ5_K*>(blk)->d = f16();
        reinterpret_cast<BlockQ5_K*>(blk)->dmin = f16();
        break;
      case GgmlType::Q6_K: reinterpret_cast<BlockQ6_K*>(blk)->d = f16(); break;
      case GgmlType::F32: reinterpret_cast<float*>(blk)[0] = scale(rng); break;
      case GgmlType::F16: reinterpret_cast<uint16_t*>(blk)[0] = f16(); break;
      case GgmlType::BF16: reinterpret_cast<uint16_t*>(blk)[0] = fp32_to_bf16(scale(rng)); break;
      default: ADD_FAILURE() << "no weight generator for " << tr.name;
    }
  }
  return q;
}

TEST(Quant, VecDotMatchesDotOfDequantized) {
  const int64_t n = 1024;
  int n_checked = 0;
  for (uint32_t id = 0; id < 64; id++) {
    const TypeTraits* tr = find_type_traits(id);
    if (tr == nullptr || tr->vec_dot == nullptr) continue;
    SCOPED_TRACE(tr->name);
    const TypeTraits& at = type_traits(tr->vec_dot_type);
    ASSERT_NE(at.from_float, nullptr);
    ASSERT_NE(at.to_float, nullptr);
    for (uint32_t seed = 0; seed < 4; seed++) {
      const std::vector<uint8_t> w = random_weights(tr->type, n, 100 * id + seed);
      const std::vector<float> a = random_floats(n, 7 * id + seed);
      const std::vector<uint8_t> aq = quantize(at.type, a);
      const std::vector<float> wd = dequantize(tr->type, w.data(), n);
      const std::vector<float> ad = dequantize(at.type, aq.data(), n);
      double ref = 0.0;
      double mag = 0.0;
      for (int64_t i = 0; i < n; i++) {
        ref += static_cast<double>(wd[i]) * ad[i];
        mag += std::fabs(static_cast<double>(wd[i]) * ad[i]);
      }
      double tol = 1e-6 * mag;
      if (at.type == GgmlType::Q8_1) {
        // The minimum's term uses s = F16(d * sum q) rather than F16(d) * sum q: each is within
        // 2^-11 relative of d * sum q.
        const auto* ab = reinterpret_cast<const BlockQ8_1*>(aq.data());
        for (int64_t b = 0; b < n / 32; b++) {
          const uint16_t m = tr->type == GgmlType::Q4_1
                                 ? reinterpret_cast<const BlockQ4_1*>(w.data())[b].m
                                 : reinterpret_cast<const BlockQ5_1*>(w.data())[b].m;
          tol += std::fabs(fp16_to_fp32(m) * fp16_to_fp32(ab[b].s)) * (2.0 / 2048);
        }
      }
      const float got = tr->vec_dot(n, w.data(), aq.data());
      EXPECT_NEAR(got, ref, tol) << "seed " << seed;
    }
    n_checked++;
  }
  EXPECT_EQ(n_checked, 14);  // F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL Q2_K..Q6_K
}

TEST(Quant, VecDotOfExactValuesIsExact) {
  // Q8_0 x Q8_0 with d = 1 on both sides: the integer dot product, exactly.
  std::vector<float> x(64), y(64);
  for (int i = 0; i < 64; i++) {
    x[i] = static_cast<float>((i * 37) % 255 - 127);
    y[i] = static_cast<float>((i * 91) % 255 - 127);
  }
  x[0] = y[0] = x[32] = y[32] = 127.0f;
  double exact = 0.0;
  for (int i = 0; i < 64; i++) exact += static_cast<double>(x[i]) * y[i];
  const std::vector<uint8_t> wq = quantize(GgmlType::Q8_0, x);
  const std::vector<uint8_t> aq = quantize(GgmlType::Q8_0, y);
  EXPECT_EQ(vec_dot_q8_0(64, wq.data(), aq.data()), static_cast<float>(exact));
  EXPECT_EQ(vec_dot_f32(64, x.data(), y.data()), static_cast<float>(exact));
}

TEST(Quant, TraitsTableIsConsistent) {
  EXPECT_EQ(type_traits(GgmlType::Q4_0).type_size, sizeof(BlockQ4_0));
  EXPECT_EQ(type_traits(GgmlType::Q4_1).type_size, sizeof(BlockQ4_1));
  EXPECT_EQ(type_traits(GgmlType::Q5_0).type_size, sizeof(BlockQ5_0));
  EXPECT_EQ(type_traits(GgmlType::Q5_1).type_size, sizeof(BlockQ5_1));
  EXPECT_EQ(type_traits(GgmlType::Q8_0).type_size, sizeof(BlockQ8_0));
  EXPECT_EQ(type_traits(GgmlType::Q8_1).type_size, sizeof(BlockQ8_1));
  EXPECT_EQ(type_traits(GgmlType::Q2_K).type_size, sizeof(BlockQ2_K));
  EXPECT_EQ(type_traits(GgmlType::Q3_K).type_size, sizeof(BlockQ3_K));
  EXPECT_EQ(type_traits(GgmlType::Q4_K).type_size, sizeof(BlockQ4_K));
  EXPECT_EQ(type_traits(GgmlType::Q5_K).type_size, sizeof(BlockQ5_K));
  EXPECT_EQ(type_traits(GgmlType::Q6_K).type_size, sizeof(BlockQ6_K));
  EXPECT_EQ(type_traits(GgmlType::Q8_K).type_size, sizeof(BlockQ8_K));
  EXPECT_EQ(type_traits(GgmlType::IQ4_NL).type_size, sizeof(BlockIQ4_NL));
  for (uint32_t id = 0; id < 64; id++) {
    const TypeTraits* tr = find_type_traits(id);
    if (tr == nullptr || tr->vec_dot == nullptr) continue;
    EXPECT_NE(tr->to_float, nullptr) << tr->name;
    EXPECT_NE(type_traits(tr->vec_dot_type).from_float, nullptr) << tr->name;
    EXPECT_EQ(type_traits(tr->vec_dot_type).block_size % tr->block_size, 0) << tr->name;
  }
}

}  // namespace
}  // namespace lumen
