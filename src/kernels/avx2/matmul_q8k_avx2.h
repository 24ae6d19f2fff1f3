// AVX2 as the K-quant kernels written once (kernels/generic/kq_*.h) see it: Kq, the SIMD layer
// Vf with kernels/generic/kq_traits.h's KqBase plus AVX2's integer steps (avx512::Kq has the
// same names), and the vectorized Q8_K activation conversion (kernels/generic/quantize_q8k.h).
// Include only from AVX2 translation units: everything has internal linkage so no AVX2 copy
// can be picked by the linker for baseline code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/kq_traits.h"
#include "kernels/kquant_pack.h"

namespace lumen::kquant {

// One activation row (n_in a multiple of 256) into kquant_pack.h's blocks, with ActCorr::Pairs16
// corrections (corr_mul * pair sums) when corr_mul != 0 (else ActCorr::None).
void convert_act_avx2(const float* x, uint8_t* dst, int64_t n_in, int corr_mul);

namespace avx2 {

// One vector holds one 32-bit lane per row of an 8-row group. The integer dot product has no
// VNNI here: vpmaddubsw gives int16 pair sums (the formats' small values keep them exact), which
// scale_sums widens to int32 with the group scale (vpmaddwd). Tiles of 2 tokens, the most the 16
// YMM registers hold.
namespace {
struct Kq : KqBase<lumen::avx2::Vf, 8, 2> {
  static constexpr bool kI16Sums = true;  // dot_u8s8 sums are int16 (saturating pairs, wrapping adds)

  LUMEN_V_INLINE I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  LUMEN_V_INLINE I set1_u8(uint8_t v) { return _mm256_set1_epi8(static_cast<char>(v)); }
  LUMEN_V_INLINE I and_(I a, I b) { return _mm256_and_si256(a, b); }
  LUMEN_V_INLINE I or_(I a, I b) { return _mm256_or_si256(a, b); }
  // a | (b & m)
  LUMEN_V_INLINE I or_and(I a, I b, I m) { return _mm256_or_si256(a, _mm256_and_si256(b, m)); }
  // acc += u8 weights x s8 activations, 4 per lane: int16 pair sums.
  LUMEN_V_INLINE I dot_u8s8(I acc, I w, I a) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, a)); }
  // acc += int16 pairs x int16 pairs, summed to int32 per lane.
  LUMEN_V_INLINE I dot_i16(I acc, I a, I b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
  // A group's scales, one signed int8 (or the low nibble of one byte) per row at p, in the form
  // scale_sums multiplies: both 16-bit halves of each row's lane.
  LUMEN_V_INLINE I group_scales_i8(const uint8_t* p) {
    int64_t v;
    std::memcpy(&v, p, 8);
    const __m128i b = _mm_unpacklo_epi8(_mm_cvtsi64_si128(v), _mm_cvtsi64_si128(v));  // s0 s0 s1 s1 ...
    return _mm256_cvtepi8_epi16(b);
  }
  LUMEN_V_INLINE I group_scales_u4(const uint8_t* p) {
    int64_t v;
    std::memcpy(&v, p, 8);
    const __m128i b = _mm_and_si128(_mm_cvtsi64_si128(v), _mm_set1_epi8(0x0f));
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(b, b));
  }
  // The int32 sums of dot_u8s8 times their group scale.
  LUMEN_V_INLINE I scale_sums(I acc, I s) { return _mm256_madd_epi16(acc, s); }
  // The high nibbles of two groups' bytes (kRows each at p and p + kRows) as the two 16-bit
  // halves of each row's lane: (group 2p, group 2p + 1) for dot_i16 with bsums16 pairs.
  LUMEN_V_INLINE I pair_high_nibbles(const uint8_t* p) {
    int64_t lo, hi;
    std::memcpy(&lo, p, 8);
    std::memcpy(&hi, p + 8, 8);
    const __m128i inter = _mm_unpacklo_epi8(_mm_cvtsi64_si128(lo), _mm_cvtsi64_si128(hi));
    return _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(inter, 4), _mm_set1_epi8(0x0f)));
  }
  // For K4::unpack_scales (kernels/generic/kq_nibbles.h): the u8 lanes of the lower / upper half
  // of v widened to 16 bits, and per row the two 16-bit scales of its lane in pairs as
  // scale_sums multiplies them: each in both 16-bit halves of the lane (vpmaddwd of pair sums
  // then scales and adds them).
  LUMEN_V_INLINE I widen_lo_u8(I v) { return _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v)); }
  LUMEN_V_INLINE I widen_hi_u8(I v) { return _mm256_cvtepu8_epi16(_mm256_extracti128_si256(v, 1)); }
  LUMEN_V_INLINE void split_scales(I pairs, I& first, I& second) {
    const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4,
                                            5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i dup_hi = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3,
                                            6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
    first = _mm256_shuffle_epi8(pairs, dup_lo);
    second = _mm256_shuffle_epi8(pairs, dup_hi);
  }
  // kRows fp16 values at p (any alignment) as floats.
  LUMEN_V_INLINE F load_f16_rows(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // y[0..n_rows) = v (n_rows <= 8).
  LUMEN_V_INLINE void store_rows(float* y, F v, int n_rows) {
    if (n_rows >= 8) storeu(y, v);
    else store_m(y, mask(n_rows), v);
  }
  static void convert_act(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
    convert_act_avx2(x, dst, n_in, corr_mul);
  }
  static constexpr auto pack = pack_kquant_r8;
};
}  // namespace
}  // namespace avx2
}  // namespace lumen::kquant
