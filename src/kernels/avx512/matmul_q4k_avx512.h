// Q4_K and Q5_K weights x Q8_K activations, AVX-512 VNNI (see matmul_q4k_avx512.cpp).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ4_KAvx512;
extern const MatmulKernel kMatmulQ5_KAvx512;

}  // namespace lumen
