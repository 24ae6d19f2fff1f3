// AVX-512 roofline kernels (compiled with -mavx512f/bw/vl/dq/vnni/bf16). Kept free of inline
// library code: anything instantiated here would carry AVX-512 into baseline callers.
#include <immintrin.h>

#include "kernels/roofline.h"

namespace lumen::detail {
namespace {

// Horizontal sums through memory: GCC 12's _mm512_reduce_* trip -Wuninitialized in its own
// headers, and these run once per call.
uint64_t sum_u64(__m512i v) {
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, v);
  uint64_t s = 0;
  for (uint64_t x : lanes) s += x;
  return s;
}

uint32_t sum_i32(__m512i v) {
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, v);
  uint32_t s = 0;
  for (uint32_t x : lanes) s += x;  // unsigned: wraps like the accumulators
  return s;
}

float sum_f32(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

}  // namespace

uint64_t read_stream_avx512(const void* data, size_t n_bytes) {
  const __m512i* p = static_cast<const __m512i*>(data);
  const __m512i* end = p + n_bytes / sizeof(__m512i);
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (; p < end; p += 4) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + 0));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + 1));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + 2));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + 3));
  }
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
  return sum_u64(s);
}

// 12 independent chains: FMA latency (4 cycles) x 2 pipes = 8 needed, the rest is headroom;
// 12 accumulators + 2 operands leave most of the 32 ZMM registers free.
#define LUMEN_CHAINS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)

double fma_peak_avx512(int64_t n_iterations, float a, float b, float* sink) {
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
#define LUMEN_INIT(k) __m512 c##k = _mm512_set1_ps(0.1f * k);
#define LUMEN_STEP(k) c##k = _mm512_fmadd_ps(c##k, va, vb);
#define LUMEN_SUM(k) s = _mm512_add_ps(s, c##k);
  LUMEN_CHAINS(LUMEN_INIT)
  for (int64_t i = 0; i < n_iterations; i++) {
    LUMEN_CHAINS(LUMEN_STEP)
  }
  __m512 s = _mm512_setzero_ps();
  LUMEN_CHAINS(LUMEN_SUM)
#undef LUMEN_INIT
#undef LUMEN_STEP
#undef LUMEN_SUM
  *sink = sum_f32(s);
  return static_cast<double>(n_iterations) * 12 * 16 * 2;
}

double vnni_peak_avx512(int64_t n_iterations, int32_t* sink) {
  // 64 u8 x s8 products per instruction, each a multiply and an add. Accumulators wrap
  // (hardware two's complement, no UB); only the instruction count matters.
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
  *sink = static_cast<int32_t>(sum_i32(s));
  return static_cast<double>(n_iterations) * 12 * 64 * 2;
}

#undef LUMEN_CHAINS

}  // namespace lumen::detail
