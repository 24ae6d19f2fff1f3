// AVX2+FMA+F16C matmul kernels for float weights (F32, F16, BF16). Weights are repacked into
// panels of 32 rows stored k-major, so one YMM load holds 8 rows at one k; a register tile of
// 32 rows x 3 tokens (12 YMM accumulators) reuses each weight vector three times. F16 and BF16
// panels are widened to F32 in registers while streaming (few tokens) or once per k-block into
// an L1-resident buffer (many tokens). The same tile code serves every batch size.
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

extern const MatmulKernel kMatmulF16Avx2;   // F16 weights x activations rounded to F16
extern const MatmulKernel kMatmulBf16Avx2;  // BF16 weights x activations rounded to BF16 (FMA in F32)
extern const MatmulKernel kMatmulF32Avx2;

}  // namespace lumen
