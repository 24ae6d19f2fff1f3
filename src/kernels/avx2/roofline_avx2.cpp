// AVX2 roofline kernels (this file is compiled with -mavx2 -mfma). Kept free of inline library
// code: anything instantiated here would carry AVX instructions into baseline callers.
#include <immintrin.h>

#include "kernels/roofline.h"

namespace lumen::detail {

uint64_t read_stream_avx2(const void* data, size_t n_bytes) {
  const __m256i* p = static_cast<const __m256i*>(data);
  const __m256i* end = p + n_bytes / sizeof(__m256i);
  // Four 64-bit add chains: a 1-cycle add per 64-byte load is far from any limit, so the loop
  // is bound by how fast memory delivers lines.
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (; p < end; p += 8) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(p + 0));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(p + 1));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(p + 2));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(p + 3));
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(p + 4));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(p + 5));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(p + 6));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(p + 7));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(h)) + static_cast<uint64_t>(_mm_extract_epi64(h, 1));
}

double fma_peak_avx2(int64_t n_iterations, float a, float b, float* sink) {
  // 12 independent chains cover FMA latency (4-5 cycles) x 2 pipes with room to spare, and
  // with the two operands they fit the 16 YMM registers.
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f);
  __m256 c3 = _mm256_set1_ps(0.3f), c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f);
  __m256 c6 = _mm256_set1_ps(0.6f), c7 = _mm256_set1_ps(0.7f), c8 = _mm256_set1_ps(0.8f);
  __m256 c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f), c11 = _mm256_set1_ps(1.1f);
  for (int64_t i = 0; i < n_iterations; i++) {
    c0 = _mm256_fmadd_ps(c0, va, vb);
    c1 = _mm256_fmadd_ps(c1, va, vb);
    c2 = _mm256_fmadd_ps(c2, va, vb);
    c3 = _mm256_fmadd_ps(c3, va, vb);
    c4 = _mm256_fmadd_ps(c4, va, vb);
    c5 = _mm256_fmadd_ps(c5, va, vb);
    c6 = _mm256_fmadd_ps(c6, va, vb);
    c7 = _mm256_fmadd_ps(c7, va, vb);
    c8 = _mm256_fmadd_ps(c8, va, vb);
    c9 = _mm256_fmadd_ps(c9, va, vb);
    c10 = _mm256_fmadd_ps(c10, va, vb);
    c11 = _mm256_fmadd_ps(c11, va, vb);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  *sink = _mm_cvtss_f32(_mm_add_ps(h, _mm_movehl_ps(h, h)));
  return static_cast<double>(n_iterations) * 12 * 8 * 2;
}

}  // namespace lumen::detail
