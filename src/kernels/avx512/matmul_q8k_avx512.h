// AVX-512 VNNI as the K-quant kernels written once (kernels/generic/kq_*.h) see it: Kq, the SIMD
// layer Vf with kernels/generic/kq_traits.h's KqBase plus AVX-512's integer steps (avx2::Kq has
// the same names), the vectorized Q8_K activation conversion (kernels/generic/quantize_q8k.h),
// and the helpers of the AVX-512-only GEMM tiles (Q4_K, Q6_K). Include only from AVX-512
// translation units: everything has internal linkage so no AVX-512 copy can be picked by the
// linker for baseline code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/kq_traits.h"
#include "kernels/kquant_pack.h"
#include "kernels/matmul.h"

namespace lumen::kquant {

// One activation row (n_in a multiple of 256) into kquant_pack.h's blocks, with ActCorr::Int32
// corrections when corr_mul != 0 (else ActCorr::None).
void convert_act_avx512(const float* x, uint8_t* dst, int64_t n_in, int corr_mul);

namespace avx512 {

#define LUMEN_KQ_INLINE static inline __attribute__((always_inline))

// A zero register from its own dependency-breaking xor (renamed away, no execution): GCC would
// otherwise copy one shared zero register into each accumulator with a vector move.
LUMEN_KQ_INLINE __m512i zero_idiom() {
  __m512i z;
  asm volatile("vpxord %0, %0, %0" : "=v"(z));
  return z;
}

// Makes GCC compute v[G][T] here: without it GCC sinks the per-sub-block scale multiplies to
// the end of the block and spills every sub-block's raw sums until then.
template <int G, int T>
LUMEN_KQ_INLINE void pin(__m512i (*v)[T]) {
  for (int g = 0; g < G; g++)
    for (int t = 0; t < T; t++) asm("" : "+v"(v[g][t]));
}

// GEMM tile of the many-token path (n_tokens > Kq::kTileTokens): kGemmGroups row groups x
// kGemmTokens tokens. The kernels run it one scale sub-block at a time, so only the sub-block's
// int32 sums (G*T) and the block's scaled sums (G*T) live in registers; scales and the float
// accumulators stay in memory, read once per sub-block / block. 2 x 6 = 24 accumulators: every
// weight vector feeds 6 tokens and every activation broadcast 2 row groups.
inline constexpr int kGemmGroups = 2;
inline constexpr int kGemmTokens = 6;

// Runs tile.template operator()<G, T>(g, t0) over the row groups g of rows [r0, r1) in steps
// of kGemmGroups (the last step may be narrower) and the token tiles of [0, n_tokens)
// (kGemmTokens each, then the remainder). Groups go in L2-sized batches as in for_tiles.
template <class F>
LUMEN_KQ_INLINE void for_gemm_tiles(int64_t r0, int64_t r1, int64_t n_tokens, size_t group_bytes, F&& tile) {
  const int64_t g_end = (r1 + 15) / 16;
  int64_t batch =
      group_bytes >= (size_t{256} << 10) ? 1 : static_cast<int64_t>((size_t{256} << 10) / group_bytes);
  batch = (batch + kGemmGroups - 1) / kGemmGroups * kGemmGroups;
  for (int64_t gb = r0 / 16; gb < g_end; gb += batch) {
    const int64_t ge = gb + batch < g_end ? gb + batch : g_end;
    auto groups = [&]<int T>(int64_t t) {
      int64_t g = gb;
      for (; g + kGemmGroups <= ge; g += kGemmGroups) tile.template operator()<kGemmGroups, T>(g, t);
      with_count<kGemmGroups - 1>(ge - g, [&]<int G>() { tile.template operator()<G, T>(g, t); });
    };
    int64_t t = 0;
    for (; t + kGemmTokens <= n_tokens; t += kGemmTokens) groups.template operator()<kGemmTokens>(t);
    with_count<kGemmTokens - 1>(n_tokens - t, [&]<int T>() { groups.template operator()<T>(t); });
  }
}

// One vector holds one 32-bit lane per row of a 16-row group; the integer dot products are
// VNNI's (vpdpbusd, vpdpwssd) into int32, so scale_sums is an exact int32 multiply.
namespace {
// The token tile of the GEMV path is 4: with 2 accumulators per token plus the per-block sums,
// 4 tokens fit the 32 ZMM registers; 6 and 8 spill and measured 15% slower.
struct Kq : KqBase<lumen::avx512::Vf, 16, 4> {
  static constexpr bool kI16Sums = false;  // dot_u8s8 sums are int32

  LUMEN_KQ_INLINE I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  LUMEN_KQ_INLINE I set1_u8(uint8_t v) { return _mm512_set1_epi8(static_cast<char>(v)); }
  LUMEN_KQ_INLINE I and_(I a, I b) { return _mm512_and_si512(a, b); }
  LUMEN_KQ_INLINE I or_(I a, I b) { return _mm512_or_si512(a, b); }
  // a | (b & m) in one vpternlogd.
  LUMEN_KQ_INLINE I or_and(I a, I b, I m) { return _mm512_ternarylogic_epi32(a, b, m, 0xF8); }
  // acc += u8 weights x s8 activations, 4 per lane, summed to int32.
  LUMEN_KQ_INLINE I dot_u8s8(I acc, I w, I a) { return _mm512_dpbusd_epi32(acc, w, a); }
  // acc += int16 pairs x int16 pairs, summed to int32 per lane.
  LUMEN_KQ_INLINE I dot_i16(I acc, I a, I b) { return _mm512_dpwssd_epi32(acc, a, b); }
  // A group's scales, one signed int8 (or the low nibble of one byte) per row at p, as int32.
  LUMEN_KQ_INLINE I group_scales_i8(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  LUMEN_KQ_INLINE I group_scales_u4(const uint8_t* p) {
    return _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                            _mm512_set1_epi32(0x0f));
  }
  // The int32 sums of dot_u8s8 times their group scale.
  LUMEN_KQ_INLINE I scale_sums(I acc, I s) { return _mm512_mullo_epi32(acc, s); }
  // The high nibbles of two groups' bytes (kRows each at p and p + kRows) as the two 16-bit
  // halves of each row's lane: (group 2p, group 2p + 1) for dot_i16 with bsums16 pairs.
  LUMEN_KQ_INLINE I pair_high_nibbles(const uint8_t* p) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    const __m256i inter = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
    return _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(inter, 4), _mm256_set1_epi8(0x0f)));
  }
  // For K4::unpack_scales (kernels/generic/kq_nibbles.h): the u8 lanes of the lower / upper half
  // of v widened to 16 bits, and per row the two 16-bit scales of its lane in pairs as int32
  // lanes for scale_sums.
  LUMEN_KQ_INLINE I widen_lo_u8(I v) { return _mm512_cvtepu8_epi16(_mm512_castsi512_si256(v)); }
  LUMEN_KQ_INLINE I widen_hi_u8(I v) { return _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(v, 1)); }
  LUMEN_KQ_INLINE void split_scales(I pairs, I& first, I& second) {
    first = _mm512_and_si512(pairs, _mm512_set1_epi32(0xffff));
    second = _mm512_srli_epi32(pairs, 16);
  }
  // kRows fp16 values at p (any alignment) as floats.
  LUMEN_KQ_INLINE F load_f16_rows(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  LUMEN_KQ_INLINE void store_rows(float* y, F v, int n_rows) { store_m(y, mask(n_rows), v); }
  static void convert_act(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
    convert_act_avx512(x, dst, n_in, corr_mul);
  }
  static constexpr auto pack = pack_kquant_r16;
};

// The many-token GEMM tile of a K-quant format Fmt (Q4_K, Q6_K): G row groups (16 rows each, at
// main + g * gbytes) x T tokens, one super-block at a time. Fmt gives the group layout (kMain
// weight bytes and kMeta scale bytes per block, kActBytes per activation block, kDOffset of the
// fp16 d in the block's meta bytes) and block<G, T>(), which adds each row's exact int32 sum of
// scale x sub-block dot to isum and, where Fmt::kMin, the block's float minimum terms to mterm.
// Per block y += (d * da) * isum (- mterm): the reference's float evaluation order.
template <class Fmt, int G, int T>
void gemm_tile(const uint8_t* main, size_t gbytes, int64_t nb, const uint8_t* act, size_t stride, float* y,
               int64_t ldy, int64_t row0, int64_t r1) {
  alignas(64) float facc[G][T][16] = {};
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q[G];
    const uint8_t* m[G];
    for (int g = 0; g < G; g++) {
      q[g] = main + gbytes * g + Fmt::kMain * static_cast<size_t>(b);
      m[g] = main + gbytes * g + Fmt::kMain * static_cast<size_t>(nb) + Fmt::kMeta * static_cast<size_t>(b);
    }
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + Fmt::kActBytes * static_cast<size_t>(b);
    __m512i isum[G][T];
    for (int g = 0; g < G; g++)
      for (int t = 0; t < T; t++) isum[g][t] = _mm512_setzero_si512();
    alignas(64) float mterm[G][T][16];
    Fmt::template block<G, T>(q, m, a, isum, mterm);
    for (int g = 0; g < G; g++) {
      const __m512 d = Kq::load_f16_rows(m[g] + Fmt::kDOffset);
      for (int t = 0; t < T; t++) {
        __m512 f = _mm512_load_ps(facc[g][t]);
        f = _mm512_add_ps(f, Kq::mul_rounded(_mm512_mul_ps(d, Kq::bcast_f32(a[t] + kActD)), _mm512_cvtepi32_ps(isum[g][t])));
        if constexpr (Fmt::kMin) f = _mm512_sub_ps(f, _mm512_load_ps(mterm[g][t]));
        _mm512_store_ps(facc[g][t], f);
      }
    }
  }
  for (int g = 0; g < G; g++) {
    const int64_t left = r1 - row0 - Kq::kRows * g;
    if (left <= 0) break;
    const __mmask16 mask = Kq::mask(left < Kq::kRows ? static_cast<int>(left) : Kq::kRows);
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + ldy * t + Kq::kRows * g, mask, _mm512_load_ps(facc[g][t]));
  }
}

// The GEMM path of Fmt over rows [r0, r1): gemm_tile over for_gemm_tiles' tiles.
template <class Fmt>
void gemm(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y, int64_t ldy,
          int64_t r0, int64_t r1, size_t gbytes) {
  const int64_t nb = w.n_in / kBlock;
  const uint8_t* base = w.packed.get()->data;
  for_gemm_tiles(r0, r1, n_tokens, gbytes, [&]<int G, int T>(int64_t g, int64_t t) {
    gemm_tile<Fmt, G, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act + stride * t, stride,
                         y + g * Kq::kRows + ldy * t, ldy, g * Kq::kRows, r1);
  });
}

}  // namespace
}  // namespace avx512
}  // namespace lumen::kquant
