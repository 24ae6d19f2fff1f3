// AVX-512 element-wise ops (kernels/ops.h). Free of library inline code: anything instantiated
// here would carry AVX-512 into baseline callers (hence no std::vector, std::sqrt, ...).
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn about
// it once inlined; silence that here, before the headers are read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/avx512/vec_math_avx512.h"
#include "kernels/ops_isa.h"
#include "kernels/ref/ops_ref.h"

namespace lumen {
namespace avx512 {
namespace {

using avx512::tail_mask;

// A product the compiler may not fuse with a following add or subtract (GCC contracts vector
// arithmetic into FMA by default in C++): RoPE must round each product like the reference.
inline __m512 mul_rounded(__m512 a, __m512 b) {
  __m512 p = _mm512_mul_ps(a, b);
  __asm__("" : "+v"(p));
  return p;
}

// Sum of squares in double as the reference (8 double lanes, two accumulators), then the same
// float scaling: only the double summation order differs.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
    s0 = _mm512_fmadd_pd(lo, lo, s0);
    s1 = _mm512_fmadd_pd(hi, hi, s1);
  }
  const double sum = avx512::hsum(_mm512_add_pd(s0, s1));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const __m512 scale = _mm512_set1_ps(1.0f / __builtin_sqrtf(mean + eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale);
    if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

// Angles from the reference, products rounded before the add/sub: bit-identical rotations.
void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const RopeParams& p) {
  const int64_t half = p.n_rot / 2;
  if (half > 256) return ref::rope(x, n_heads, head_dim, pos, p);
  alignas(64) float c[256], s[256];
  ref::rope_angles(pos, p, c, s);
  if (p.neox) {  // pairs (i, i + half)
    for (int64_t h = 0; h < n_heads; h++) {
      float* v = x + h * head_dim;
      for (int64_t i = 0; i < half; i += 16) {
        const __mmask16 m = tail_mask(half - i);
        const __m512 a = _mm512_maskz_loadu_ps(m, v + i), b = _mm512_maskz_loadu_ps(m, v + half + i);
        const __m512 cv = _mm512_maskz_loadu_ps(m, c + i), sv = _mm512_maskz_loadu_ps(m, s + i);
        _mm512_mask_storeu_ps(v + i, m, _mm512_sub_ps(mul_rounded(a, cv), mul_rounded(b, sv)));
        _mm512_mask_storeu_ps(v + half + i, m, _mm512_add_ps(mul_rounded(a, sv), mul_rounded(b, cv)));
      }
    }
    return;
  }
  // Adjacent pairs (2i, 2i + 1): angles duplicated per pair; even lanes a*c - b*s, odd lanes
  // b*c + a*s (= the reference's a*s + b*c: addition commutes).
  alignas(64) float cd[512], sd[512];
  for (int64_t i = 0; i < half; i++) cd[2 * i] = cd[2 * i + 1] = c[i], sd[2 * i] = sd[2 * i + 1] = s[i];
  const int64_t n_rot = 2 * half;
  const __mmask16 odd = 0xaaaa;
  for (int64_t h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < n_rot; i += 16) {
      const __mmask16 m = tail_mask(n_rot - i);
      const __m512 a = _mm512_maskz_loadu_ps(m, v + i);
      const __m512 sw = _mm512_permute_ps(a, 0xb1);  // (b, a) per pair
      const __m512 ac = mul_rounded(a, _mm512_load_ps(cd + i));
      const __m512 bs = mul_rounded(sw, _mm512_load_ps(sd + i));
      _mm512_mask_storeu_ps(v + i, m, _mm512_mask_add_ps(_mm512_sub_ps(ac, bs), odd, ac, bs));
    }
  }
}

void softmax(float* x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, tail_mask(n - i), x + i));
  const __m512 max = _mm512_set1_ps(avx512::hmax(mx));
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, avx512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max)));
    _mm512_mask_storeu_ps(x + i, m, e);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / avx512::hsum(_mm512_add_pd(s0, s1))));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = avx512::exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void vec_add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int j = 0; j < 64; j += 16)
      _mm512_storeu_ps(out + i + j, _mm512_add_ps(_mm512_loadu_ps(a + i + j), _mm512_loadu_ps(b + i + j)));
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

}  // namespace
}  // namespace avx512

const OpsTable kOpsAvx512 = {"avx512", avx512::rms_norm, avx512::rope, avx512::softmax, avx512::swiglu, avx512::vec_add};

}  // namespace lumen
