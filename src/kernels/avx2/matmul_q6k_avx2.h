// Q6_K weights x Q8_K activations, AVX2 (see matmul_q6k_avx2.cpp).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ6_KAvx2;

}  // namespace lumen
