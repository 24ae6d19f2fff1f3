// AVX-512 VNNI matmul kernel for IQ4_NL weights (Q8_0 activations).
// See matmul_q32_avx512_core.h.
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulIq4NlAvx512;

}  // namespace lumen
