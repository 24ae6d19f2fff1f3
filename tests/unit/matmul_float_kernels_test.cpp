// The float-weight matmul kernels (F32, F16, BF16; AVX2 and AVX-512; F32's narrow panels) against the scalar
// reference kernel, through the MatmulKernel interface, over shapes with tails; plus the
// properties the forward pass relies on: activation rounding bit for bit as the reference,
// results independent of the batch a token is in, no writes outside the rows asked for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/ref/matmul_ref.h"

namespace lumen {
namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

Weights make_weights(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(n_in * n_out));
  for (float& v : f) v = u(rng);
  Weights r;
  const size_t row_bytes = row_size(type, n_in);
  r.bytes.resize(row_bytes * n_out);
  for (int64_t o = 0; o < n_out; o++) {
    if (type == GgmlType::F32) std::memcpy(&r.bytes[o * row_bytes], &f[o * n_in], row_bytes);
    else type_traits(type).from_float(&f[o * n_in], &r.bytes[o * row_bytes], n_in);
  }
  r.w.type = type;
  r.w.n_in = n_in;
  r.w.n_out = n_out;
  r.w.data = r.bytes.data();
  r.w.row_bytes = row_bytes;
  return r;
}

std::vector<float> make_acts(int64_t n_in, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_in * n_tokens));
  for (float& v : x) v = g(rng);
  return x;
}

constexpr float kSentinel = -12345.0f;

// Runs kernel k as the driver would: activations converted into 64-byte aligned rows, output
// rows computed in shares that are multiples of row_align (the last ending at n_out). y has a
// stride wider than n_out; the extra columns must keep the sentinel.
std::vector<float> run(const MatmulKernel& k, const WeightMatrix& w0, const std::vector<float>& x, int64_t n_tokens,
                       int64_t ldy) {
  WeightMatrix w = w0;
  auto packed = std::make_shared<PackedWeights>();
  k.pack(w, *packed);
  w.kernel = &k;
  w.packed = packed;
  const size_t stride = (k.act_row_bytes(w.n_in) + 63) / 64 * 64;
  std::vector<uint8_t> raw(stride * n_tokens + 64);
  uint8_t* act = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw.data()) + 63) & ~uintptr_t{63});
  for (int64_t t = 0; t < n_tokens; t++) k.convert_act(&x[t * w.n_in], act + t * stride, w.n_in);
  std::vector<float> y(static_cast<size_t>(n_tokens * ldy), kSentinel);
  const int64_t align = k.row_align;
  const int64_t n_groups = (w.n_out + align - 1) / align;
  // Three shares where possible: first group, middle, rest.
  std::vector<int64_t> cuts = {0};
  if (n_groups > 2) cuts.push_back(align);
  if (n_groups > 3) cuts.push_back(align * (n_groups / 2 + 1));
  cuts.push_back(w.n_out);
  for (size_t i = 0; i + 1 < cuts.size(); i++) k.compute(w, act, stride, n_tokens, y.data(), ldy, cuts[i], cuts[i + 1]);
  return y;
}

std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa, cpu_features())) v.push_back(isa);
  return v;
}

// Each ISA's kernel for `type`, and for F32 each ISA's narrow kernel too (one-vector panels).
std::vector<const MatmulKernel*> simd_kernels(GgmlType type, const std::vector<Isa>& isas) {
  std::vector<const MatmulKernel*> ks;
  for (Isa isa : isas) {
    const MatmulKernel* k = find_matmul_kernel(type, isa);
    EXPECT_EQ(k->isa, isa) << k->name;
    ks.push_back(k);
    WeightMatrix small;
    small.type = type;
    small.n_out = 32;
    if (const MatmulKernel* n = find_matmul_kernel_for(small, isa); n != k) ks.push_back(n);
  }
  return ks;
}

// |w|.|a| per output, for a tolerance that scales with the terms summed (float accumulation
// vs the reference's double).
std::vector<double> magnitudes(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens) {
  const TypeTraits& tr = type_traits(w.type);
  std::vector<float> row(w.n_in);
  std::vector<double> m(static_cast<size_t>(n_tokens * w.n_out));
  for (int64_t o = 0; o < w.n_out; o++) {
    tr.to_float(w.row(o), row.data(), w.n_in);
    for (int64_t t = 0; t < n_tokens; t++) {
      double s = 0;
      for (int64_t i = 0; i < w.n_in; i++) s += std::fabs(static_cast<double>(row[i]) * x[t * w.n_in + i]);
      m[t * w.n_out + o] = s;
    }
  }
  return m;
}

// Every SIMD kernel for `type` against the reference on one shape (the reference runs once).
void check_shape(GgmlType type, const std::vector<Isa>& isas, int64_t n_in, int64_t n_out, int64_t n_tokens) {
  SCOPED_TRACE(testing::Message() << type_name(type) << " n_in " << n_in << " n_out " << n_out << " tokens " << n_tokens);
  const MatmulKernel* ref = reference_matmul_kernel(type);
  Weights W = make_weights(type, n_in, n_out, static_cast<uint32_t>(n_in * 31 + n_out));
  const std::vector<float> x = make_acts(n_in, n_tokens, static_cast<uint32_t>(n_tokens + 7));
  const int64_t ldy = n_out + 5;
  const std::vector<float> want = run(*ref, W.w, x, n_tokens, ldy);
  const std::vector<double> mag = magnitudes(W.w, x, n_tokens);
  const double rel = 4e-7 * std::sqrt(static_cast<double>(n_in)) + 2e-7;
  for (const MatmulKernel* k : simd_kernels(type, isas)) {
    ASSERT_NE(k, nullptr);
    const std::vector<float> got = run(*k, W.w, x, n_tokens, ldy);
    int bad = 0;
    for (int64_t t = 0; t < n_tokens; t++) {
      for (int64_t o = 0; o < n_out; o++) {
        const double g = got[t * ldy + o], e = want[t * ldy + o];
        if (std::fabs(g - e) > rel * mag[t * n_out + o] + 1e-30 && bad++ < 5)
          ADD_FAILURE() << k->name << " token " << t << " row " << o << ": " << g << " vs " << e << " (|w||a| "
                        << mag[t * n_out + o] << ")";
      }
      for (int64_t o = n_out; o < ldy; o++)
        if (got[t * ldy + o] != kSentinel && bad++ < 5) ADD_FAILURE() << k->name << " wrote past n_out at token " << t;
    }
    EXPECT_EQ(bad, 0) << k->name;
  }
}

class FloatKernels : public testing::TestWithParam<GgmlType> {};

TEST_P(FloatKernels, MatchReferenceOverShapes) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  for (int64_t n_in : {1, 2, 7, 32, 129})
    for (int64_t n_out : {1, 5, 31, 64, 65, 130})
      for (int64_t n_tokens : {1, 2, 3, 7, 16, 33}) check_shape(GetParam(), isas, n_in, n_out, n_tokens);
  // Long rows (several k-blocks of the blocked path, odd tail) and many rows.
  check_shape(GetParam(), isas, 2048 + 3, 70, 33);
  check_shape(GetParam(), isas, 1000, 200, 13);
  check_shape(GetParam(), isas, 256, 4096, 1);
  check_shape(GetParam(), isas, 256, 4096 + 17, 7);
}

// A token's outputs must not depend on how many tokens share the call (decode vs prefill,
// batches of sequences): the forward pass's cache-vs-recompute property needs it.
TEST_P(FloatKernels, TokenResultIndependentOfBatch) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  for (const MatmulKernel* k : simd_kernels(GetParam(), isas)) {
    SCOPED_TRACE(k->name);
    const int64_t n_in = 700, n_out = 150, n_tokens = 40;
    Weights W = make_weights(GetParam(), n_in, n_out, 5);
    const std::vector<float> x = make_acts(n_in, n_tokens, 6);
    const std::vector<float> all = run(*k, W.w, x, n_tokens, n_out);
    for (int64_t n : {1, 2, 3, 5, 8, 13}) {
      for (int64_t t0 = 0; t0 + n <= n_tokens; t0 += 11) {
        const std::vector<float> part(x.begin() + t0 * n_in, x.begin() + (t0 + n) * n_in);
        const std::vector<float> y = run(*k, W.w, part, n, n_out);
        for (int64_t t = 0; t < n; t++)
          for (int64_t o = 0; o < n_out; o++)
            ASSERT_EQ(y[t * n_out + o], all[(t0 + t) * n_out + o]) << "batch " << n << " token " << t0 + t << " row " << o;
      }
    }
  }
}

// The driver (matmul()) with a thread pool gives the kernel's own results.
TEST_P(FloatKernels, DriverWithThreads) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  for (Isa isa : isas) {
    const int64_t n_in = 300, n_out = 1000, n_tokens = 9;
    Weights W = make_weights(GetParam(), n_in, n_out, 9);
    const std::vector<float> x = make_acts(n_in, n_tokens, 10);
    WeightMatrix w = W.w;
    prepare_weights(w, isa);
    ASSERT_EQ(w.kernel->isa, isa);
    std::vector<uint8_t> scratch(matmul_scratch_size(w, n_tokens));
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
    matmul(w, x.data(), n_in, n_tokens, y.data(), n_out, scratch.data(), pool);
    const std::vector<float> want = run(*w.kernel, W.w, x, n_tokens, n_out);
    for (size_t i = 0; i < y.size(); i++) ASSERT_EQ(y[i], want[i]) << i;
  }
}

// An F32 matrix of at most 64 rows gets the narrow kernel (a router shared out among the
// threads), and a row gets the same bits from it as from the wide one.
TEST(FloatNarrowKernel, GivesTheWideBits) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  for (Isa isa : isas) {
    const MatmulKernel* wide = find_matmul_kernel(GgmlType::F32, isa);
    for (int64_t n_out : {1, 5, 32, 64, 65}) {
      Weights W = make_weights(GgmlType::F32, 2048, n_out, 3);
      const MatmulKernel* chosen = find_matmul_kernel_for(W.w, isa);
      EXPECT_EQ(chosen == wide, n_out > 64) << chosen->name << " for " << n_out << " rows";
      for (int64_t n_tokens : {1, 7, 33}) {
        const std::vector<float> x = make_acts(2048, n_tokens, 4);
        EXPECT_EQ(run(*chosen, W.w, x, n_tokens, n_out), run(*wide, W.w, x, n_tokens, n_out))
            << chosen->name << " " << n_out << " rows, " << n_tokens << " tokens";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FloatKernels, testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16),
                         [](const testing::TestParamInfo<GgmlType>& i) { return std::string(type_name(i.param)); });

// Values that exercise rounding: ties, subnormals, overflow to infinity, infinities, NaN.
std::vector<float> tricky_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e10f, -1e-10f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(), 1e-40f, 5.9604645e-8f, 2.9802322e-8f,
                          2.98023259e-8f, 6.1035156e-5f, 6.1e-5f, 3.0e-5f, 1.00048828125f, 1.00146484375f};
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x00008000u, 0x7f7fffffu, 0x3f801000u, 0x3f803000u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
    v.push_back(-f);
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000; i++) {
    const uint32_t bits = any(rng);
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(FloatKernelActivations, RoundLikeTheReference) {
  const std::vector<float> x = tricky_values();
  const int64_t n = static_cast<int64_t>(x.size());
  for (Isa isa : simd_isas()) {
    SCOPED_TRACE(isa_name(isa));
    for (int64_t len : {n, n - 1, int64_t{5}}) {
      // F16 kernels: activations are F32 values rounded through F16.
      const MatmulKernel* k16 = find_matmul_kernel(GgmlType::F16, isa);
      std::vector<uint8_t> out(k16->act_row_bytes(len) + 64);
      k16->convert_act(x.data(), out.data(), len);
      for (int64_t i = 0; i < len; i++) {
        float got;
        std::memcpy(&got, &out[4 * i], 4);
        ASSERT_EQ(bits_of(got), bits_of(fp16_to_fp32(fp32_to_fp16(x[i])))) << x[i];
      }
      // BF16 kernels: BF16 values (AVX-512) or F32 values rounded through BF16 (AVX2).
      const MatmulKernel* kb = find_matmul_kernel(GgmlType::BF16, isa);
      std::vector<uint8_t> outb(kb->act_row_bytes(len) + 64);
      kb->convert_act(x.data(), outb.data(), len);
      const bool narrow = kb->act_row_bytes(1000) < 1000 * 4;  // BF16 values, not F32 (rows may be padded)
      for (int64_t i = 0; i < len; i++) {
        if (narrow) {
          uint16_t got;
          std::memcpy(&got, &outb[2 * i], 2);
          ASSERT_EQ(got, fp32_to_bf16(x[i])) << x[i];
        } else {
          float got;
          std::memcpy(&got, &outb[4 * i], 4);
          ASSERT_EQ(bits_of(got), bits_of(bf16_to_fp32(fp32_to_bf16(x[i])))) << x[i];
        }
      }
    }
  }
}

TEST(FloatKernelActivations, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(19, 1.0f);
  x[3] = nan;
  x[17] = -nan;
  for (Isa isa : simd_isas())
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
      const MatmulKernel* k = find_matmul_kernel(t, isa);
      std::vector<uint8_t> out(k->act_row_bytes(19) + 64);
      k->convert_act(x.data(), out.data(), 19);
      for (int i : {3, 17}) {
        float f;
        if (k->act_row_bytes(1000) < 1000 * 4) {
          uint16_t h;
          std::memcpy(&h, &out[2 * i], 2);
          f = bf16_to_fp32(h);
        } else {
          std::memcpy(&f, &out[4 * i], 4);
        }
        EXPECT_TRUE(std::isnan(f)) << isa_name(isa) << " " << type_name(t);
      }
    }
}

}  // namespace
}  // namespace lumen

namespace lumen {
namespace {

// The opt-in F16-as-BF16 kernel: exactly the BF16 kernel on the F16 weights rounded to BF16
// (same packed values, same vdpbf16ps code), for decode- and prefill-sized batches and tails.
TEST(F16AsBf16Kernel, EqualsTheBf16KernelOnRoundedWeights) {
  if (!isa_supported(Isa::Avx512, cpu_features())) GTEST_SKIP() << "no AVX-512 BF16 here";
  const MatmulKernel* k = find_f16_as_bf16_kernel(Isa::Avx512);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(find_f16_as_bf16_kernel(Isa::Avx2), nullptr);
  EXPECT_NE(find_matmul_kernel(GgmlType::F16, Isa::Avx512), k);  // never the default
  ThreadPool pool(2);
  for (auto [n_in, n_out, n_tokens] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 1}, {130, 77, 3},
                                       {257, 150, 13}, {512, 64, 40}}) {
    SCOPED_TRACE(testing::Message() << n_in << "x" << n_out << ", " << n_tokens << " tokens");
    Weights f16 = make_weights(GgmlType::F16, n_in, n_out, 5);
    // The same weights as BF16 rows: each F16 value rounded to the nearest BF16.
    Weights bf16;
    bf16.w = f16.w;
    bf16.w.type = GgmlType::BF16;
    bf16.bytes.resize(f16.bytes.size());
    for (size_t i = 0; i < f16.bytes.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, &f16.bytes[i], 2);
      const uint16_t b = fp32_to_bf16(fp16_to_fp32(h));
      std::memcpy(&bf16.bytes[i], &b, 2);
    }
    bf16.w.data = bf16.bytes.data();
    prepare_weights(f16.w, *k);
    prepare_weights(bf16.w, Isa::Avx512);
    const std::vector<float> x = make_acts(n_in, n_tokens, 9);
    std::vector<float> y(static_cast<size_t>(n_out * n_tokens)), y_ref(y.size());
    std::vector<uint8_t> scratch(matmul_scratch_size(f16.w, n_tokens)), scratch_ref(matmul_scratch_size(bf16.w, n_tokens));
    matmul(f16.w, x.data(), n_in, n_tokens, y.data(), n_out, scratch.data(), pool);
    matmul(bf16.w, x.data(), n_in, n_tokens, y_ref.data(), n_out, scratch_ref.data(), pool);
    EXPECT_EQ(y, y_ref);
  }
}

}  // namespace
}  // namespace lumen
