// The 128-bit tails of horizontal reductions, shared by every ISA's SIMD layer
// (kernels/avx2/simd_avx2.h, kernels/avx512/simd_avx512.h): a wider vector is folded in halves
// down to 128 bits, then reduced here in one fixed order, so every ISA sums and compares in the
// same tree. static inline: each ISA's translation unit keeps its own copy.
#pragma once

#include <immintrin.h>

namespace lumen::simd128 {

static inline float hsum(__m128 b) {
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

static inline double hsum(__m128d b) {
  b = _mm_add_sd(b, _mm_unpackhi_pd(b, b));
  return _mm_cvtsd_f64(b);
}

static inline int hsum(__m128i q) {
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
  return _mm_cvtsi128_si32(q);
}

static inline float hmax(__m128 b) {
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

}  // namespace lumen::simd128
