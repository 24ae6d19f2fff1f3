// Q4_K and Q5_K weights x Q8_K activations, AVX2 (see matmul_q4k_avx2.cpp).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ4_KAvx2;
extern const MatmulKernel kMatmulQ5_KAvx2;

}  // namespace lumen
