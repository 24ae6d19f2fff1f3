// AVX2's SIMD layer: one set of names (Vf) that the kernels written once (kernels/generic/)
// use for float vectors, with avx512::Vf its AVX-512 twin, plus the free functions the AVX2-only
// kernels call. Everything is static inline (internal linkage), so nothing compiled with AVX2
// flags can be picked by the linker for baseline code. Include only from files under
// kernels/avx2/.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/generic/simd128.h"
#include "kernels/generic/vec_math.h"

#define LUMEN_V_INLINE static inline __attribute__((always_inline))

namespace lumen::avx2 {

// Lanes [0, n) set (n in 0..8; more sets all), for maskload/maskstore.
LUMEN_V_INLINE __m256i tail_mask(int64_t n) {
  const int c = n > 8 ? 8 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

namespace {  // internal linkage: each translation unit keeps its own copy
struct Vf {
  using F = __m256;   // 8 floats
  using D = __m256d;  // 4 doubles
  using M = __m256i;  // a lane mask
  using I = __m256i;  // 8 int32
  static constexpr int kLanes = 8;

  LUMEN_V_INLINE F zero() { return _mm256_setzero_ps(); }
  LUMEN_V_INLINE F set1(float v) { return _mm256_set1_ps(v); }
  LUMEN_V_INLINE F loadu(const float* p) { return _mm256_loadu_ps(p); }
  LUMEN_V_INLINE F load(const float* p) { return _mm256_load_ps(p); }
  LUMEN_V_INLINE void storeu(float* p, F v) { _mm256_storeu_ps(p, v); }
  LUMEN_V_INLINE void store(float* p, F v) { _mm256_store_ps(p, v); }
  LUMEN_V_INLINE F bcast(const float* p) { return _mm256_broadcast_ss(p); }
  // kLanes 16-bit values at p (aligned) widened: F16, or BF16 (a float's upper half).
  LUMEN_V_INLINE F load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p))); }
  LUMEN_V_INLINE F load_bf16(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  // min(n, kLanes) 16-bit values at p (n >= 1, any alignment) widened, the other lanes zero.
  LUMEN_V_INLINE F load_f16_part(const uint16_t* p, int64_t n) { return _mm256_cvtph_ps(load_u16_part(p, n)); }
  LUMEN_V_INLINE F load_bf16_part(const uint16_t* p, int64_t n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_u16_part(p, n)), 16));
  }
  LUMEN_V_INLINE __m128i load_u16_part(const uint16_t* p, int64_t n) {  // AVX2 has no masked 16-bit load
    if (n >= 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    alignas(16) uint16_t tmp[8] = {};
    for (int64_t j = 0; j < n; j++) tmp[j] = p[j];
    return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  }
  // kLanes int8 values at p as floats; kLanes bytes at p, each one's nibble at bit `shift`
  // (0 or 4), as floats.
  LUMEN_V_INLINE F load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  LUMEN_V_INLINE F load_u4(const uint8_t* p, int shift) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i nib = _mm_and_si128(_mm_srl_epi16(bytes, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(0x0f));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(nib));
  }
  // The F16 value at p (any alignment) in every lane.
  LUMEN_V_INLINE F set1_f16(const void* p) {
    uint16_t h;
    __builtin_memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
  }
  // v rounded to kLanes F16 / BF16 values at p (any alignment), ties to even, as the scalar
  // fp32_to_fp16 / fp32_to_bf16 (NaN quiet).
  LUMEN_V_INLINE void store_f16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  LUMEN_V_INLINE void store_bf16(uint16_t* p, F v) {
    const __m256i b = bf16_bits(v);
    // Every lane is below 2^16: the unsigned-saturating pack keeps it.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
  }
  // Each lane rounded to BF16 (ties to even, NaN quiet) in the low 16 bits of its int32 lane, in
  // integer arithmetic as fp32_to_bf16.
  LUMEN_V_INLINE I bf16_bits(F v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(64)), nan);
  }
  // v rounded to the nearest F16 / BF16 (ties to even) and widened back.
  LUMEN_V_INLINE F round_f16(F v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }
  LUMEN_V_INLINE F round_bf16(F v) { return _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits(v), 16)); }
  LUMEN_V_INLINE M mask(int64_t n) { return tail_mask(n); }  // the first min(n, kLanes) lanes
  // Lanes of m from p (the others zero, not read) / stored to p.
  LUMEN_V_INLINE F load_m(M m, const float* p) { return _mm256_maskload_ps(p, m); }
  LUMEN_V_INLINE F load_m_or(M m, const float* p, F fill) {  // lanes off m: fill
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  LUMEN_V_INLINE void store_m(float* p, M m, F v) { _mm256_maskstore_ps(p, m, v); }
  // Bit j: lane j of a == b (ordered).
  LUMEN_V_INLINE unsigned eq_mask(F a, F b) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
  }
  LUMEN_V_INLINE F keep(M m, F v) { return _mm256_and_ps(v, _mm256_castsi256_ps(m)); }  // others 0
  LUMEN_V_INLINE F abs(F v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  LUMEN_V_INLINE F add(F a, F b) { return _mm256_add_ps(a, b); }
  LUMEN_V_INLINE F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  LUMEN_V_INLINE F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  LUMEN_V_INLINE F div(F a, F b) { return _mm256_div_ps(a, b); }
  LUMEN_V_INLINE F max(F a, F b) { return _mm256_max_ps(a, b); }
  // a <= b ? x : y per lane (false for NaN)
  LUMEN_V_INLINE F select_le(F a, F b, F x, F y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LE_OQ)); }
  LUMEN_V_INLINE F min(F a, F b) { return _mm256_min_ps(a, b); }
  LUMEN_V_INLINE F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  LUMEN_V_INLINE F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  // a * b rounded to float on its own: the empty asm hides the product from GCC, which would
  // otherwise contract it with a following add into an FMA; the references round separately.
  LUMEN_V_INLINE F mul_rounded(F a, F b) {
    F p = _mm256_mul_ps(a, b);
    asm("" : "+x"(p));
    return p;
  }
  // Even lanes a - b, odd lanes a + b (adding the negated b: the same rounding).
  LUMEN_V_INLINE F sub_even_add_odd(F a, F b) {
    const F sign = _mm256_castsi256_ps(_mm256_set1_epi64x(static_cast<int64_t>(0x80000000ll)));
    return _mm256_add_ps(a, _mm256_xor_ps(b, sign));
  }
  LUMEN_V_INLINE F swap_pairs(F v) { return _mm256_permute_ps(v, 0xb1); }  // (1, 0, 3, 2, ...)
  LUMEN_V_INLINE F round_even(F v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // y * 2^n for integral n in [-150, 129], as two factors 2^(n/2) 2^(n - n/2) so that subnormal
  // results and overflow come out right without AVX-512's scalef.
  LUMEN_V_INLINE F scale_pow2(F y, F n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const F f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const F f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, f1), f2);
  }
  LUMEN_V_INLINE float first(F v) { return _mm256_cvtss_f32(v); }
  LUMEN_V_INLINE float hsum(F v) {
    return simd128::hsum(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
  }
  LUMEN_V_INLINE float hmax(F v) {
    return simd128::hmax(_mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
  }
  // int32 lanes.
  LUMEN_V_INLINE I zero_i() { return _mm256_setzero_si256(); }
  LUMEN_V_INLINE I set1_i(int32_t v) { return _mm256_set1_epi32(v); }
  LUMEN_V_INLINE I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  // 16-bit lanes shifted by n bits.
  LUMEN_V_INLINE I srl_i16(I v, int n) { return _mm256_srli_epi16(v, n); }
  LUMEN_V_INLINE I sll_i16(I v, int n) { return _mm256_slli_epi16(v, n); }
  LUMEN_V_INLINE int hsum_i(I v) { return simd128::hsum(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1))); }
  // Whole vectors (64-bit lanes) at p, 32-byte aligned: the roofline's read stream.
  LUMEN_V_INLINE I load_i(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
  LUMEN_V_INLINE I add_i64(I a, I b) { return _mm256_add_epi64(a, b); }
  LUMEN_V_INLINE uint64_t hsum_u64(I v) {
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return static_cast<uint64_t>(_mm_cvtsi128_si64(h)) + static_cast<uint64_t>(_mm_extract_epi64(h, 1));
  }
  LUMEN_V_INLINE F to_float(I v) { return _mm256_cvtepi32_ps(v); }
  LUMEN_V_INLINE I trunc_i(F v) { return _mm256_cvttps_epi32(v); }  // toward zero
  // v rounded ties-to-even to int32 and clamped to int8's range (NaN: -128).
  LUMEN_V_INLINE I to_i8_range(F v) {
    const I r = _mm256_cvtps_epi32(round_even(v));
    return _mm256_max_epi32(_mm256_min_epi32(r, _mm256_set1_epi32(127)), _mm256_set1_epi32(-128));
  }
  // 32 int32 values already in int8's range (4 vectors) as 32 bytes at dst, in order. The packs
  // interleave 128-bit lanes ([q0l q1l q2l q3l | q0h q1h q2h q3h] in dword units); the permute
  // restores element order.
  LUMEN_V_INLINE void store_i8x32(int8_t* dst, const I* q) {
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  // Doubles: the float vector's lower and upper halves widened, and their arithmetic.
  LUMEN_V_INLINE D zero_d() { return _mm256_setzero_pd(); }
  LUMEN_V_INLINE D lo_d(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
  LUMEN_V_INLINE D hi_d(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
  LUMEN_V_INLINE D add_d(D a, D b) { return _mm256_add_pd(a, b); }
  LUMEN_V_INLINE D fmadd_d(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  LUMEN_V_INLINE double hsum(D v) {
    return simd128::hsum(_mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1)));
  }
};
}  // namespace

LUMEN_V_INLINE __m256 exp(__m256 x) { return vec_math::exp<Vf>(x); }
LUMEN_V_INLINE __m256 tanh(__m256 x) { return vec_math::tanh<Vf>(x); }
LUMEN_V_INLINE float exp1(float x) { return vec_math::exp1<Vf>(x); }
LUMEN_V_INLINE float hsum(__m256 v) { return Vf::hsum(v); }
LUMEN_V_INLINE double hsum(__m256d v) { return Vf::hsum(v); }
LUMEN_V_INLINE float hmax(__m256 v) { return Vf::hmax(v); }

}  // namespace lumen::avx2
