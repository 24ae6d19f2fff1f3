// The roofline's measuring loops (kernels/roofline.h) written once over an ISA's SIMD layer V
// and instantiated by kernels/avx2/roofline_avx2.cpp and kernels/avx512/roofline_avx512.cpp.
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lumen::roofline_loops {
namespace {

// 12 independent chains: FMA latency (4-5 cycles) x 2 pipes needs 8-10, the rest is headroom;
// 12 accumulators and 2 operands fit even AVX2's 16 registers. Named variables, not an array,
// so the chains stay in registers whatever the optimisation level. It stays defined for the
// ISA files' own peak loops (AVX-512's VNNI), which #undef it.
#define LUMEN_CHAINS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)

// Sums every 64-bit word of [data, data + n_bytes) (64-byte aligned, a multiple of 256 bytes).
// Four add chains: a 1-cycle add per load is far from any limit, so the loop is bound by how
// fast memory delivers lines.
template <class V>
uint64_t read_stream(const void* data, size_t n_bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  const uint8_t* end = p + n_bytes / 256 * 256;
  constexpr int kVec = V::kLanes * 4;  // bytes per vector
  typename V::I s0 = V::zero_i(), s1 = s0, s2 = s0, s3 = s0;
  for (; p < end; p += 256) {
#pragma GCC unroll 8
    for (int k = 0; k < 256; k += 4 * kVec) {
      s0 = V::add_i64(s0, V::load_i(p + k));
      s1 = V::add_i64(s1, V::load_i(p + k + kVec));
      s2 = V::add_i64(s2, V::load_i(p + k + 2 * kVec));
      s3 = V::add_i64(s3, V::load_i(p + k + 3 * kVec));
    }
  }
  return V::hsum_u64(V::add_i64(V::add_i64(s0, s1), V::add_i64(s2, s3)));
}

// n_iterations x 12 FMA chains; returns the flops done (2 per lane per FMA).
template <class V>
double fma_peak(int64_t n_iterations, float a, float b, float* sink) {
  const typename V::F va = V::set1(a), vb = V::set1(b);
#define LUMEN_INIT(k) typename V::F c##k = V::set1(0.1f * k);
#define LUMEN_STEP(k) c##k = V::fmadd(c##k, va, vb);
#define LUMEN_SUM(k) s = V::add(s, c##k);
  LUMEN_CHAINS(LUMEN_INIT)
  for (int64_t i = 0; i < n_iterations; i++) {
    LUMEN_CHAINS(LUMEN_STEP)
  }
  typename V::F s = V::zero();
  LUMEN_CHAINS(LUMEN_SUM)
#undef LUMEN_INIT
#undef LUMEN_STEP
#undef LUMEN_SUM
  *sink = V::hsum(s);
  return static_cast<double>(n_iterations) * 12 * V::kLanes * 2;
}

}  // namespace
}  // namespace lumen::roofline_loops
