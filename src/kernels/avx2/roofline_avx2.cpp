// AVX2 roofline kernels: kernels/generic/roofline_loops.h over avx2::Vf.
#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/roofline_loops.h"
#include "kernels/roofline.h"

namespace lumen::detail {

uint64_t read_stream_avx2(const void* data, size_t n_bytes) { return roofline_loops::read_stream<avx2::Vf>(data, n_bytes); }

double fma_peak_avx2(int64_t n_iterations, float a, float b, float* sink) {
  return roofline_loops::fma_peak<avx2::Vf>(n_iterations, a, b, sink);
}

}  // namespace lumen::detail
