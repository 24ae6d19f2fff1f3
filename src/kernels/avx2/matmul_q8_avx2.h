// AVX2 matmul kernel for Q8_0 weights (Q8_0 activations). See matmul_q32_avx2_core.h.
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ8_0Avx2;

}  // namespace lumen
