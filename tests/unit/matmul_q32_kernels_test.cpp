// The AVX2 / AVX-512 kernels of the 32-element block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL) against the scalar reference kernel, through the MatmulKernel interface: bit-exact
// activation conversion, and products equal up to float summation order over shapes with
// tails (one block, odd block counts, one row, rows past a 16-row group, odd token counts),
// for every ISA this machine runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"
#include "core/thread_pool.h"
#include "kernels/avx2/matmul_avx2.h"
#include "kernels/avx512/matmul_avx512.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/quant_pack.h"
#include "kernels/ref/matmul_ref.h"
#include "test_support.h"

namespace lumen {
namespace {

std::vector<const MatmulKernel*> q32_kernels() {
  return {
      &kMatmulQ8_0Avx512,
      &kMatmulQ4_0Avx512,
      &kMatmulQ4_1Avx512,
      &kMatmulQ5_0Avx512,
      &kMatmulQ5_1Avx512,
      &kMatmulIq4NlAvx512,
      &kMatmulQ8_0Avx2,
      &kMatmulQ4_0Avx2,
      &kMatmulQ4_1Avx2,
      &kMatmulQ5_0Avx2,
      &kMatmulQ5_1Avx2,
      &kMatmulIq4NlAvx2,
  };
}

bool runnable(const MatmulKernel& k) { return isa_supported(k.isa, cpu_features()); }

std::string kernel_label(const MatmulKernel& k) { return std::string(k.name); }

// The bias the kernel's activation correction undoes (0: Q8_1 activations, or signed weights:
// the AVX2 Q8_0/IQ4_NL kernels use the sign trick instead of unsigned weights).
int act_bias(const MatmulKernel& k) {
  switch (k.weight_type) {
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL: return k.isa == Isa::Avx512 ? 128 : 0;
    case GgmlType::Q4_0: return 8;
    case GgmlType::Q5_0: return 16;
    default: return 0;
  }
}

struct AlignedBuf {
  explicit AlignedBuf(size_t n) : p(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64))) {
    std::memset(p, 0, (n + 63) / 64 * 64 + 64);
  }
  ~AlignedBuf() { std::free(p); }
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
  uint8_t* p;
};

// Activations with the awkward cases: exact rounding ties (x * 127/amax = k + 0.5), an all-zero
// block, negative zeros, tiny and large magnitudes.
std::vector<float> make_activations(int64_t n_tokens, int64_t n_in, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  for (float& v : x) v = nd(rng);
  const int64_t nb = n_in / 32;
  for (int64_t t = 0; t < n_tokens; t++)
    for (int64_t b = 0; b < nb; b++) {
      float* blk = &x[static_cast<size_t>(t * n_in + b * 32)];
      switch ((t * 7 + b) % 6) {
        case 0:  // amax 127: id == 1, halves are ties
          for (int j = 0; j < 32; j++) blk[j] = static_cast<float>(j * 4 - 62) + 0.5f;
          blk[5] = 127.0f;
          break;
        case 1:
          for (int j = 0; j < 32; j++) blk[j] = (j % 2) ? 0.0f : -0.0f;
          break;
        case 2:
          for (int j = 0; j < 32; j++) blk[j] *= 1e-4f;
          break;
        case 3:
          for (int j = 0; j < 32; j++) blk[j] *= 300.0f;
          break;
        default: break;
      }
    }
  return x;
}

// n_out rows of quantized weights; for Q8_0 a few quants are -128, which the quantizer never
// writes but a file may hold.
std::vector<uint8_t> make_weights(GgmlType type, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.01f, 3.0f);
  const size_t rb = row_size(type, n_in);
  std::vector<uint8_t> data(rb * static_cast<size_t>(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  FromFloatFn quantize = weight_quantizer(type);
  for (int64_t r = 0; r < n_out; r++) {
    const float s = scale(rng);
    for (float& v : row) v = nd(rng) * s + (type == GgmlType::Q4_1 || type == GgmlType::Q5_1 ? 0.3f * s : 0.0f);
    quantize(row.data(), data.data() + rb * static_cast<size_t>(r), n_in);
  }
  if (type == GgmlType::Q8_0)
    for (size_t i = 2; i < data.size(); i += 97)
      if (i % 34 >= 2) data[i] = 0x80;
  return data;
}

// |w| . |a| per output: the scale of the rounding error any summation order may make.
std::vector<double> magnitudes(GgmlType type, const std::vector<uint8_t>& wq, int64_t n_out, int64_t n_in,
                               const std::vector<uint8_t>& aq, size_t a_row, int64_t n_tokens) {
  const TypeTraits& wt = type_traits(type);
  const TypeTraits& at = type_traits(wt.vec_dot_type);
  std::vector<float> wf(static_cast<size_t>(n_out * n_in)), af(static_cast<size_t>(n_tokens * n_in));
  for (int64_t r = 0; r < n_out; r++) wt.to_float(wq.data() + r * row_size(type, n_in), &wf[r * n_in], n_in);
  for (int64_t t = 0; t < n_tokens; t++) at.to_float(aq.data() + t * a_row, &af[t * n_in], n_in);
  std::vector<double> m(static_cast<size_t>(n_out * n_tokens));
  for (int64_t t = 0; t < n_tokens; t++)
    for (int64_t r = 0; r < n_out; r++) {
      double s = 0;
      for (int64_t i = 0; i < n_in; i++) s += std::fabs(static_cast<double>(wf[r * n_in + i]) * af[t * n_in + i]);
      m[t * n_out + r] = s;
    }
  return m;
}

// Weights are quantized once per (type, shape) and shared by the token counts (IQ4_NL's
// quantizer is slow).
const std::vector<uint8_t>& cached_weights(GgmlType type, int64_t n_out, int64_t n_in) {
  static std::map<std::tuple<int, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& w = cache[{static_cast<int>(type), n_out, n_in}];
  if (w.empty()) {
    std::mt19937 rng(static_cast<uint32_t>(n_out * 131 + n_in));
    w = make_weights(type, n_out, n_in, rng);
  }
  return w;
}

// w packed for kernel k directly (no dispatch).
void pack_for(const MatmulKernel& k, WeightMatrix& w) {
  auto packed = std::make_shared<PackedWeights>();
  k.pack(w, *packed);
  w.kernel = &k;
  w.packed = packed;
}

// The kernel's rows are computed in calls of `chunk` rows (0: row_align x 1..3 by the seed, as
// matmul() may split them; n_out: one call, so a lone token's stream takes four-group tiles).
void check_product(const MatmulKernel& k, int64_t n_in, int64_t n_out, int64_t n_tokens, uint32_t seed,
                   int64_t chunk = 0) {
  SCOPED_TRACE(kernel_label(k) + " n_in=" + std::to_string(n_in) + " n_out=" + std::to_string(n_out) +
               " n_tokens=" + std::to_string(n_tokens));
  std::mt19937 rng(seed);
  const GgmlType type = k.weight_type;
  const std::vector<uint8_t>& wq = cached_weights(type, n_out, n_in);
  std::vector<float> x = make_activations(n_tokens, n_in, rng);

  // Reference: the scalar kernel on the file layout.
  const MatmulKernel& ref = *reference_matmul_kernel(type);
  const WeightMatrix wr = test::file_matrix(type, wq, n_out, n_in);
  const size_t ref_stride = ref.act_row_bytes(n_in);
  std::vector<uint8_t> ref_act(ref_stride * static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; t++) ref.convert_act(&x[t * n_in], ref_act.data() + t * ref_stride, n_in);
  const int64_t ldy = n_out + 3;  // rows of y wider than n_out: the kernel must not write past n_out
  std::vector<float> y_ref(static_cast<size_t>(ldy * n_tokens), 0.0f);
  ref.compute(wr, ref_act.data(), ref_stride, n_tokens, y_ref.data(), ldy, 0, n_out);

  // The kernel, with row ranges split the way matmul() splits them.
  WeightMatrix w = wr;
  pack_for(k, w);
  const size_t stride = (k.act_row_bytes(n_in) + 63) / 64 * 64;
  AlignedBuf act(stride * static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; t++) k.convert_act(&x[t * n_in], act.p + t * stride, n_in);
  const float sentinel = 12345.0f;
  std::vector<float> y(static_cast<size_t>(ldy * n_tokens), sentinel);
  if (chunk == 0) chunk = k.row_align * (1 + static_cast<int64_t>(seed % 3));
  for (int64_t r0 = 0; r0 < n_out; r0 += chunk)
    k.compute(w, act.p, stride, n_tokens, y.data(), ldy, r0, std::min(n_out, r0 + chunk));

  const std::vector<double> mag = magnitudes(type, wq, n_out, n_in, ref_act, ref_stride, n_tokens);
  int n_bad = 0;
  for (int64_t t = 0; t < n_tokens; t++) {
    for (int64_t r = 0; r < n_out; r++) {
      const float got = y[t * ldy + r], want = y_ref[t * ldy + r];
      const double tol = 2e-6 * mag[t * n_out + r] + 1e-30;
      if (!(std::fabs(static_cast<double>(got) - want) <= tol) && n_bad++ < 5)
        ADD_FAILURE() << "t=" << t << " r=" << r << " got " << got << " want " << want << " tol " << tol;
    }
    for (int64_t r = n_out; r < ldy; r++)
      if (y[t * ldy + r] != sentinel && n_bad++ < 5) ADD_FAILURE() << "wrote past n_out at t=" << t << " r=" << r;
  }
  EXPECT_EQ(n_bad, 0);
}

TEST(MatmulQ32Kernels, ActivationConversionIsBitExact) {
  for (const MatmulKernel* k : q32_kernels()) {
    if (!runnable(*k)) continue;
    SCOPED_TRACE(kernel_label(*k));
    std::mt19937 rng(7);
    for (int64_t n_in : {32, 96, 2048}) {
      const std::vector<float> x = make_activations(3, n_in, rng);
      const int64_t nb = n_in / 32;
      for (int64_t t = 0; t < 3; t++) {
        std::vector<Q32ActBlock> want(static_cast<size_t>(nb)), got(static_cast<size_t>(nb));
        const int bias = act_bias(*k);
        if (type_traits(k->weight_type).vec_dot_type == GgmlType::Q8_0)
          q32_convert_act_q8_0(&x[t * n_in], want.data(), nb, bias);
        else
          q32_convert_act_q8_1(&x[t * n_in], want.data(), nb);
        ASSERT_EQ(k->act_row_bytes(n_in), nb * sizeof(Q32ActBlock));
        k->convert_act(&x[t * n_in], reinterpret_cast<uint8_t*>(got.data()), n_in);
        for (int64_t b = 0; b < nb; b++) {
          ASSERT_EQ(std::memcmp(want[b].qs, got[b].qs, 32), 0) << "block " << b;
          ASSERT_EQ(std::memcmp(&want[b].d, &got[b].d, 4), 0) << "block " << b;
          ASSERT_EQ(std::memcmp(&want[b].corr, &got[b].corr, 4), 0) << "block " << b;
        }
      }
    }
  }
}

// The oracle of the test above is itself checked against the reference block formats.
TEST(MatmulQ32Kernels, ActLayoutMatchesReferenceBlocks) {
  std::mt19937 rng(3);
  const std::vector<float> x = make_activations(1, 64, rng);
  quant::BlockQ8_0 r0[2];
  quant::BlockQ8_1 r1[2];
  from_float_q8_0(x.data(), r0, 64);
  from_float_q8_1(x.data(), r1, 64);
  Q32ActBlock a0[2], a1[2];
  q32_convert_act_q8_0(x.data(), a0, 2, 8);
  q32_convert_act_q8_1(x.data(), a1, 2);
  for (int b = 0; b < 2; b++) {
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += r0[b].qs[j];
    EXPECT_EQ(std::memcmp(a0[b].qs, r0[b].qs, 32), 0);
    EXPECT_EQ(a0[b].d, fp16_to_fp32(r0[b].d));
    EXPECT_EQ(a0[b].corr, -8 * sum);
    EXPECT_EQ(std::memcmp(a1[b].qs, r1[b].qs, 32), 0);
    EXPECT_EQ(a1[b].d, fp16_to_fp32(r1[b].d));
    EXPECT_EQ(a1[b].s, fp16_to_fp32(r1[b].s));
  }
}

TEST(MatmulQ32Kernels, MatchReferenceOverShapes) {
  const bool small = test::sanitized_build();
  for (const MatmulKernel* k : q32_kernels()) {
    if (!runnable(*k)) {
      std::printf("skipping %s: CPU lacks %s\n", k->name, isa_name(k->isa));
      continue;
    }
    uint32_t seed = 1;
    for (int64_t n_in : {32, 160, 2048})
      for (int64_t n_out : {1, 7, 16, 33, 80})
        for (int64_t n_tokens : {1, 2, 3, 5, 7, 12, 16, 33}) {
          // 5 and 12: one 5-token tile, and two full 6-token tiles (the stream path's largest case).
          if (small && n_in == 2048 && n_tokens > 3) continue;
          check_product(*k, n_in, n_out, n_tokens, seed++);
        }
    check_product(*k, 96, 4096, 5, seed++);
    check_product(*k, 160, 33, 6, seed++);
    check_product(*k, 64, 4096, 1, seed++);
    if (!small) check_product(*k, 4096, 48, 9, seed++);
    // A lone token over whole calls: four-group tiles and the single group after them (Q8_0 at
    // any width, Q4_0 from 4,096 elements).
    check_product(*k, 2048, 80, 1, seed++, 80);
    check_product(*k, 4096, 80, 1, seed++, 80);
  }
}

// A token's outputs are the same bits alone (decode's stream tiles) and in a batch of any size
// (the small-batch tiles, the GEMM tiles): each row's block sums meet their scales in the same
// order whatever the tile.
TEST(MatmulQ32Kernels, ATokenGetsTheSameBitsAloneAndInABatch) {
  for (const MatmulKernel* k : q32_kernels()) {
    if (!runnable(*k)) continue;
    for (int64_t n_in : {2048, 4096}) {
      SCOPED_TRACE(kernel_label(*k) + " n_in=" + std::to_string(n_in));
      const int64_t n_out = 80;
      std::mt19937 rng(static_cast<uint32_t>(n_in));
      const std::vector<uint8_t>& wq = cached_weights(k->weight_type, n_out, n_in);
      const std::vector<float> x = make_activations(13, n_in, rng);
      WeightMatrix w = test::file_matrix(k->weight_type, wq, n_out, n_in);
      pack_for(*k, w);
      const size_t stride = (k->act_row_bytes(n_in) + 63) / 64 * 64;
      AlignedBuf act(stride * 13);
      for (int64_t t = 0; t < 13; t++) k->convert_act(&x[t * n_in], act.p + t * stride, n_in);
      std::vector<float> alone(static_cast<size_t>(n_out));
      k->compute(w, act.p, stride, 1, alone.data(), n_out, 0, n_out);
      for (int64_t n_tokens : {2, 5, 13}) {
        std::vector<float> batch(static_cast<size_t>(n_out * n_tokens));
        k->compute(w, act.p, stride, n_tokens, batch.data(), n_out, 0, n_out);
        EXPECT_EQ(std::memcmp(alone.data(), batch.data(), sizeof(float) * n_out), 0) << n_tokens << " tokens";
      }
    }
  }
}

// Through the dispatch table and matmul()'s threaded driver, for each ISA level.
TEST(MatmulQ32Kernels, DispatchAndDriver) {
  ThreadPool pool(2);
  for (const MatmulKernel* k : q32_kernels()) {
    if (!runnable(*k)) continue;
    SCOPED_TRACE(kernel_label(*k));
    EXPECT_EQ(find_matmul_kernel(k->weight_type, k->isa), k);
    std::mt19937 rng(11);
    const int64_t n_in = 256, n_out = 300, n_tokens = 9;
    std::vector<uint8_t> wq = make_weights(k->weight_type, n_out, n_in, rng);
    std::vector<float> x = make_activations(n_tokens, n_in, rng);
    WeightMatrix w = test::file_matrix(k->weight_type, wq, n_out, n_in);
    WeightMatrix wref = w;
    prepare_weights(w, k->isa);
    prepare_weights(wref, Isa::Scalar);
    ASSERT_EQ(w.kernel, k);
    std::vector<uint8_t> scratch(matmul_scratch_size(w, n_tokens)), scratch_ref(matmul_scratch_size(wref, n_tokens));
    std::vector<float> y(static_cast<size_t>(n_out * n_tokens)), y_ref(y.size());
    matmul(w, x.data(), n_in, n_tokens, y.data(), n_out, scratch.data(), pool);
    matmul(wref, x.data(), n_in, n_tokens, y_ref.data(), n_out, scratch_ref.data(), pool);
    double max_abs = 0;
    for (float v : y_ref) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < y.size(); i++) ASSERT_NEAR(y[i], y_ref[i], 1e-5 * max_abs) << "i=" << i;
  }
}

}  // namespace
}  // namespace lumen
