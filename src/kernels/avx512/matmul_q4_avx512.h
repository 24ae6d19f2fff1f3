// AVX-512 VNNI matmul kernels for Q4_0 (Q8_0 activations) and Q4_1 (Q8_1 activations).
// See matmul_q32_avx512_core.h.
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ4_0Avx512;
extern const MatmulKernel kMatmulQ4_1Avx512;

}  // namespace lumen
