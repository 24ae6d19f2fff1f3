// AVX-512 float-weight matmul kernels (see the header): kernels/generic/matmul_float.h over
// avx512::FloatMm, plus what only AVX-512 has: BF16 weights through vdpbf16ps (pairs of k per
// row, the activations rounded to BF16 pairs), also the opt-in F16-as-BF16 kernel.
#include "kernels/avx512/matmul_avx512.h"

#include "core/dtype.h"
#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/matmul_float.h"

namespace lumen {
namespace avx512 {
namespace {

using float_mm::min64;
using float_mm::Src;
using U32Alias = uint32_t __attribute__((may_alias));

// 32 ZMM registers: a tile of 64 rows x 6 tokens (24 accumulators). A panel's k-block in the
// blocked path is 256 KiB (2048 k of F16): it stays in L2 while every token tile of the share
// passes over it. F16 is widened in registers each time (vcvtph2ps runs beside the FMAs:
// measured as fast as widening once into an F32 buffer).
struct FloatMm : Vf {
  static constexpr int kTokens = 6;
  static constexpr size_t kBlockBytes = 256 * 1024;
  static constexpr int64_t kWidenMinTokens = 0;
  // One k-step of BF16 pairs: acc[t][v] += the pairs of k-step k (2 k per row) x token t's pair.
  template <int NT, int kV>
  static inline __attribute__((always_inline)) void bf16_pairs_step(const uint8_t* wp, int64_t k, const uint8_t* a,
                                                                    size_t as, __m512 (*acc)[kV]) {
    const auto* w = reinterpret_cast<const __m512i*>(wp) + k * kV;
    __m512i wv[kV];
#pragma GCC unroll 4
    for (int v = 0; v < kV; v++) wv[v] = _mm512_load_si512(w + v);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      const __m512i b = _mm512_set1_epi32(*reinterpret_cast<const U32Alias*>(a + t * as + 4 * k));
#pragma GCC unroll 4
      for (int v = 0; v < kV; v++) acc[t][v] = _mm512_dpbf16_ps(acc[t][v], (__m512bh)wv[v], (__m512bh)b);
    }
  }
};
using K = float_mm::Kernels<FloatMm>;
using KNarrow = float_mm::Kernels<FloatMm, 1>;
constexpr int64_t kNR = K::kNR;

// BF16: panel p, pair j, row r, half h -> element ((p * K2 + j) * kNR + r) * 2 + h; an odd
// n_in leaves the last pair's second half zero (the activations pad it with zero too).
// to_bf16_bits maps a stored 16-bit value to the BF16 bits to pack.
template <uint16_t (*to_bf16_bits)(uint16_t)>
void pack_bf16_pairs(const WeightMatrix& w, PackedWeights& out) {
  const int64_t K = w.n_in, K2 = (K + 1) / 2, n_panels = (w.n_out + kNR - 1) / kNR;
  auto* dst = reinterpret_cast<uint16_t*>(out.allocate(2 * static_cast<size_t>(n_panels * kNR * K2 * 2)));
  for (int64_t p = 0; p < n_panels; p++) {
    uint16_t* pd = dst + p * kNR * K2 * 2;
    const int64_t rows = min64(kNR, w.n_out - p * kNR);
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
      const int64_t k1 = min64(K, k0 + 64);
      for (int64_t r = 0; r < rows; r++) {
        const auto* src = reinterpret_cast<const uint16_t*>(w.data + static_cast<size_t>(p * kNR + r) * w.row_bytes);
        for (int64_t k = k0; k < k1; k++) pd[((k >> 1) * kNR + r) * 2 + (k & 1)] = to_bf16_bits(src[k]);
      }
    }
  }
}

uint16_t bf16_as_is(uint16_t b) { return b; }
// F16 computed as BF16 (the opt-in kMatmulF16AsBf16Avx512): the nearest BF16 of its exact F32 value.
uint16_t f16_to_bf16(uint16_t h) { return fp32_to_bf16(fp16_to_fp32(h)); }

void pack_bf16(const WeightMatrix& w, PackedWeights& out) { pack_bf16_pairs<bf16_as_is>(w, out); }
void pack_f16_as_bf16(const WeightMatrix& w, PackedWeights& out) { pack_bf16_pairs<f16_to_bf16>(w, out); }

size_t act_bytes_bf16(int64_t n_in) { return static_cast<size_t>((n_in + 1) / 2) * 4 + float_mm::kActPad; }

inline __m256i to_bf16(__m512 v) { return _mm512_cvtepi32_epi16(Vf::bf16_bits(v)); }

void convert_bf16(const float* x, uint8_t* dst, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(out + i, m, to_bf16(_mm512_maskz_loadu_ps(m, x + i)));
  }
  if (n & 1) out[n] = 0;  // the odd tail's partner in the last pair
}

}  // namespace
}  // namespace avx512

using avx512::K;
using avx512::KNarrow;
const MatmulKernel kMatmulF16Avx512 = {"f16/avx512", GgmlType::F16, Isa::Avx512, K::kNR, K::pack_half, K::act_bytes,
                                       K::convert_rounded<avx512::Vf::round_f16>, K::compute<avx512::Src::F16>};
const MatmulKernel kMatmulBf16Avx512 = {"bf16/avx512-bf16", GgmlType::BF16, Isa::Avx512, K::kNR, avx512::pack_bf16,
                                        avx512::act_bytes_bf16, avx512::convert_bf16, K::compute<avx512::Src::Bf16Pairs>};
const MatmulKernel kMatmulF16AsBf16Avx512 = {"f16-as-bf16/avx512-bf16", GgmlType::F16, Isa::Avx512, K::kNR,
                                             avx512::pack_f16_as_bf16, avx512::act_bytes_bf16, avx512::convert_bf16,
                                             K::compute<avx512::Src::Bf16Pairs>};
const MatmulKernel kMatmulF32Avx512 = {"f32/avx512", GgmlType::F32, Isa::Avx512, K::kNR, K::pack_f32, K::act_bytes,
                                       K::convert_f32, K::compute<avx512::Src::F32>};
const MatmulKernel kMatmulF32NarrowAvx512 = {"f32-narrow/avx512", GgmlType::F32, Isa::Avx512, KNarrow::kNR, KNarrow::pack_f32,
                                          KNarrow::act_bytes, KNarrow::convert_f32, KNarrow::compute<avx512::Src::F32>};

}  // namespace lumen
