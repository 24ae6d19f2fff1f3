// Q2_K weights x Q8_K activations, AVX-512 VNNI (see matmul_q2k_avx512.cpp).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulQ2_KAvx512;

}  // namespace lumen
