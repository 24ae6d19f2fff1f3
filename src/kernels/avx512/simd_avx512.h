// AVX-512's SIMD layer: one set of names (Vf) that the kernels written once (kernels/generic/)
// use for float vectors, with avx2::Vf its AVX2 twin, plus the free functions the AVX-512-only
// kernels call. Everything is static inline (internal linkage), so nothing compiled with
// AVX-512 flags can be picked by the linker for baseline code. Include only from files under
// kernels/avx512/.
#pragma once

// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn about
// it once inlined; silence that here, before the headers are read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/generic/simd128.h"
#include "kernels/generic/vec_math.h"

#define LUMEN_V_INLINE static inline __attribute__((always_inline))

namespace lumen::avx512 {

LUMEN_V_INLINE __mmask16 tail_mask(int64_t n) {  // the first n (0..16; more: all) lanes
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

namespace {  // internal linkage: each translation unit keeps its own copy
struct Vf {
  using F = __m512;   // 16 floats
  using D = __m512d;  // 8 doubles
  using M = __mmask16;
  using I = __m512i;  // 16 int32
  static constexpr int kLanes = 16;

  LUMEN_V_INLINE F zero() { return _mm512_setzero_ps(); }
  LUMEN_V_INLINE F set1(float v) { return _mm512_set1_ps(v); }
  LUMEN_V_INLINE F loadu(const float* p) { return _mm512_loadu_ps(p); }
  LUMEN_V_INLINE F load(const float* p) { return _mm512_load_ps(p); }
  LUMEN_V_INLINE void storeu(float* p, F v) { _mm512_storeu_ps(p, v); }
  LUMEN_V_INLINE void store(float* p, F v) { _mm512_store_ps(p, v); }
  LUMEN_V_INLINE F bcast(const float* p) { return _mm512_set1_ps(*p); }
  // kLanes 16-bit values at p (aligned) widened: F16, or BF16 (a float's upper half).
  LUMEN_V_INLINE F load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))); }
  LUMEN_V_INLINE F load_bf16(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  // min(n, kLanes) 16-bit values at p (n >= 1, any alignment) widened, the other lanes zero.
  LUMEN_V_INLINE F load_f16_part(const uint16_t* p, int64_t n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p)); }
  LUMEN_V_INLINE F load_bf16_part(const uint16_t* p, int64_t n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(tail_mask(n), p)), 16));
  }
  // kLanes int8 values at p as floats; kLanes bytes at p, each one's nibble at bit `shift`
  // (0 or 4), as floats.
  LUMEN_V_INLINE F load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  LUMEN_V_INLINE F load_u4(const uint8_t* p, int shift) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i nib = _mm_and_si128(_mm_srl_epi16(bytes, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(0x0f));
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(nib));
  }
  // The F16 value at p (any alignment) in every lane.
  LUMEN_V_INLINE F set1_f16(const void* p) {
    uint16_t h;
    __builtin_memcpy(&h, p, 2);
    return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
  }
  // v rounded to kLanes F16 / BF16 values at p (any alignment), ties to even, as the scalar
  // fp32_to_fp16 / fp32_to_bf16 (NaN quiet).
  LUMEN_V_INLINE void store_f16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  LUMEN_V_INLINE void store_bf16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bf16_bits(v)));
  }
  // Each lane rounded to BF16 (ties to even, NaN quiet) in the low 16 bits of its int32 lane, in
  // integer arithmetic as fp32_to_bf16 (vcvtneps2bf16 would flush subnormals to zero).
  LUMEN_V_INLINE I bf16_bits(F v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(64));
  }
  // v rounded to the nearest F16 (ties to even) and widened back.
  LUMEN_V_INLINE F round_f16(F v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
  LUMEN_V_INLINE M mask(int64_t n) { return tail_mask(n); }  // the first min(n, kLanes) lanes
  // Lanes of m from p (the others zero, not read) / stored to p.
  LUMEN_V_INLINE F load_m(M m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  LUMEN_V_INLINE F load_m_or(M m, const float* p, F fill) { return _mm512_mask_loadu_ps(fill, m, p); }  // off m: fill
  LUMEN_V_INLINE void store_m(float* p, M m, F v) { _mm512_mask_storeu_ps(p, m, v); }
  // Bit j: lane j of a == b (ordered).
  LUMEN_V_INLINE unsigned eq_mask(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  LUMEN_V_INLINE F keep(M m, F v) { return _mm512_maskz_mov_ps(m, v); }  // others 0
  LUMEN_V_INLINE F abs(F v) { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), v); }
  LUMEN_V_INLINE F add(F a, F b) { return _mm512_add_ps(a, b); }
  LUMEN_V_INLINE F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  LUMEN_V_INLINE F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  LUMEN_V_INLINE F div(F a, F b) { return _mm512_div_ps(a, b); }
  LUMEN_V_INLINE F max(F a, F b) { return _mm512_max_ps(a, b); }
  // a <= b ? x : y per lane (false for NaN)
  LUMEN_V_INLINE F select_le(F a, F b, F x, F y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LE_OQ), y, x); }
  LUMEN_V_INLINE F min(F a, F b) { return _mm512_min_ps(a, b); }
  LUMEN_V_INLINE F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  LUMEN_V_INLINE F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  // a * b rounded to float on its own: the empty asm hides the product from GCC, which would
  // otherwise contract it with a following add into an FMA; the references round separately.
  LUMEN_V_INLINE F mul_rounded(F a, F b) {
    F p = _mm512_mul_ps(a, b);
    asm("" : "+v"(p));
    return p;
  }
  // Even lanes a - b, odd lanes a + b.
  LUMEN_V_INLINE F sub_even_add_odd(F a, F b) { return _mm512_mask_add_ps(_mm512_sub_ps(a, b), 0xaaaa, a, b); }
  LUMEN_V_INLINE F swap_pairs(F v) { return _mm512_permute_ps(v, 0xb1); }  // (1, 0, 3, 2, ...)
  LUMEN_V_INLINE F round_even(F v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // y * 2^n (n integral): scalef, with correct subnormals and overflow.
  LUMEN_V_INLINE F scale_pow2(F y, F n) { return _mm512_scalef_ps(y, n); }
  LUMEN_V_INLINE float first(F v) { return _mm_cvtss_f32(_mm512_castps512_ps128(v)); }
  LUMEN_V_INLINE float hsum(F v) {
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return simd128::hsum(_mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)));
  }
  LUMEN_V_INLINE float hmax(F v) {
    const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    return simd128::hmax(_mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)));
  }
  // int32 lanes.
  LUMEN_V_INLINE I zero_i() { return _mm512_setzero_si512(); }
  LUMEN_V_INLINE I set1_i(int32_t v) { return _mm512_set1_epi32(v); }
  LUMEN_V_INLINE I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  // 16-bit lanes shifted by n bits.
  LUMEN_V_INLINE I srl_i16(I v, int n) { return _mm512_srli_epi16(v, n); }
  LUMEN_V_INLINE I sll_i16(I v, int n) { return _mm512_slli_epi16(v, n); }
  LUMEN_V_INLINE int hsum_i(I v) {
    const __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return simd128::hsum(_mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
  }
  // Whole vectors (64-bit lanes) at p, 64-byte aligned: the roofline's read stream.
  LUMEN_V_INLINE I load_i(const void* p) { return _mm512_load_si512(p); }
  LUMEN_V_INLINE I add_i64(I a, I b) { return _mm512_add_epi64(a, b); }
  LUMEN_V_INLINE uint64_t hsum_u64(I v) {
    const __m256i s = _mm256_add_epi64(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return static_cast<uint64_t>(_mm_cvtsi128_si64(h)) + static_cast<uint64_t>(_mm_extract_epi64(h, 1));
  }
  LUMEN_V_INLINE F to_float(I v) { return _mm512_cvtepi32_ps(v); }
  LUMEN_V_INLINE I trunc_i(F v) { return _mm512_cvttps_epi32(v); }  // toward zero
  // v rounded ties-to-even to int32 and clamped to int8's range (NaN: -128).
  LUMEN_V_INLINE I to_i8_range(F v) {
    const I r = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_max_epi32(_mm512_min_epi32(r, _mm512_set1_epi32(127)), _mm512_set1_epi32(-128));
  }
  // 32 int32 values already in int8's range (2 vectors) as 32 bytes at dst, in order.
  LUMEN_V_INLINE void store_i8x32(int8_t* dst, const I* q) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm512_cvtepi32_epi8(q[1]));
  }
  // Doubles: the float vector's lower and upper halves widened, and their arithmetic.
  LUMEN_V_INLINE D zero_d() { return _mm512_setzero_pd(); }
  LUMEN_V_INLINE D lo_d(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
  LUMEN_V_INLINE D hi_d(F v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
  LUMEN_V_INLINE D add_d(D a, D b) { return _mm512_add_pd(a, b); }
  LUMEN_V_INLINE D fmadd_d(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  LUMEN_V_INLINE double hsum(D v) {
    const __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    return simd128::hsum(_mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1)));
  }
};
}  // namespace

LUMEN_V_INLINE __m512 exp(__m512 x) { return vec_math::exp<Vf>(x); }
LUMEN_V_INLINE __m512 tanh(__m512 x) { return vec_math::tanh<Vf>(x); }
LUMEN_V_INLINE float exp1(float x) { return vec_math::exp1<Vf>(x); }
LUMEN_V_INLINE float hsum(__m512 v) { return Vf::hsum(v); }
LUMEN_V_INLINE double hsum(__m512d v) { return Vf::hsum(v); }
LUMEN_V_INLINE float hmax(__m512 v) { return Vf::hmax(v); }

}  // namespace lumen::avx512
