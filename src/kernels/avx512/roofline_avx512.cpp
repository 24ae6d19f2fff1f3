// AVX-512 roofline kernels: kernels/generic/roofline_loops.h over avx512::Vf, and the VNNI peak
// (AVX-512 only). Kept free of inline library code: anything instantiated here would carry
// AVX-512 into baseline callers.
#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/roofline_loops.h"
#include "kernels/roofline.h"

namespace lumen::detail {
uint64_t read_stream_avx512(const void* data, size_t n_bytes) {
  return roofline_loops::read_stream<avx512::Vf>(data, n_bytes);
}

double fma_peak_avx512(int64_t n_iterations, float a, float b, float* sink) {
  return roofline_loops::fma_peak<avx512::Vf>(n_iterations, a, b, sink);
}

double vnni_peak_avx512(int64_t n_iterations, int32_t* sink) {
  // The 12 chains of roofline_loops.h; 64 u8 x s8 products per instruction, each a multiply
  // and an add. Accumulators wrap (two's complement, no UB); only the instruction count matters.
  const __m512i va = _mm512_set1_epi8(3), vb = _mm512_set1_epi8(-2);
#define LUMEN_INIT(k) __m512i c##k = _mm512_set1_epi32(k);
#define LUMEN_STEP(k) c##k = _mm512_dpbusd_epi32(c##k, va, vb);
#define LUMEN_SUM(k) s = _mm512_add_epi32(s, c##k);
  LUMEN_CHAINS(LUMEN_INIT)
  for (int64_t i = 0; i < n_iterations; i++) {
    LUMEN_CHAINS(LUMEN_STEP)
  }
  __m512i s = _mm512_setzero_si512();
  LUMEN_CHAINS(LUMEN_SUM)
#undef LUMEN_INIT
#undef LUMEN_STEP
#undef LUMEN_SUM
  *sink = avx512::Vf::hsum_i(s);
  return static_cast<double>(n_iterations) * 12 * 64 * 2;
}

#undef LUMEN_CHAINS

}  // namespace lumen::detail
