// Q3_K weights x Q8_K activations, AVX2 (see matmul_q3k_avx2.cpp).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ3_KAvx2;

}  // namespace lumen
