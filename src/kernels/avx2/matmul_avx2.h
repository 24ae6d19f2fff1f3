// The AVX2 (+FMA+F16C) matmul kernels, all in one list; matmul_dispatch.cpp files them in the
// (weight type, ISA) table. Each is defined in this folder by the translation unit of its family:
// matmul_float_avx2.cpp (kernels/generic/matmul_float.h), matmul_q32_avx2.cpp (32-element
// blocks), matmul_kq_slices_avx2.cpp and matmul_kq_nibbles_avx2.cpp (K-quants,
// kernels/generic/kq_slices.h and kq_nibbles.h).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

// Float weights: panels of 32 rows stored k-major, 32 rows x 3 tokens per register tile.
extern const MatmulKernel kMatmulF32Avx2;
// F32 in panels of 8 rows (one vector), for matrices of a few dozen rows (find_matmul_kernel_for).
extern const MatmulKernel kMatmulF32NarrowAvx2;
extern const MatmulKernel kMatmulF16Avx2;   // F16 weights x activations rounded to F16
extern const MatmulKernel kMatmulBf16Avx2;  // BF16 weights x activations rounded to BF16 (FMA in F32)

// 32-element blocks x Q8_0 (Q8_1 for the formats with a minimum) activations.
extern const MatmulKernel kMatmulQ8_0Avx2;
extern const MatmulKernel kMatmulQ4_0Avx2;
extern const MatmulKernel kMatmulQ4_1Avx2;
extern const MatmulKernel kMatmulQ5_0Avx2;
extern const MatmulKernel kMatmulQ5_1Avx2;
extern const MatmulKernel kMatmulIq4NlAvx2;

// K-quants x Q8_K activations.
extern const MatmulKernel kMatmulQ2_KAvx2;
extern const MatmulKernel kMatmulQ3_KAvx2;
extern const MatmulKernel kMatmulQ4_KAvx2;
extern const MatmulKernel kMatmulQ5_KAvx2;
extern const MatmulKernel kMatmulQ6_KAvx2;

}  // namespace lumen
