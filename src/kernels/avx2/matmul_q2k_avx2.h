// Q2_K weights x Q8_K activations, AVX2 (see matmul_q2k_avx2.cpp).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ2_KAvx2;

}  // namespace lumen
