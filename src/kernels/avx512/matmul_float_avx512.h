// AVX-512 matmul kernels for float weights (F32, F16, BF16). Weights are repacked into panels
// of 64 rows stored k-major (for each k, the 64 rows' values side by side), so one vector load
// holds 16 rows at one k and a register tile of 64 rows x 6 tokens (24 ZMM accumulators)
// reuses every loaded weight vector six times. The same tile code serves decode (one token)
// and prefill, so a (row, token) result does not depend on the batch it was computed in.
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

// F16 weights x activations rounded to F16 (products exact in F32, F32 accumulation); the
// weights are widened in registers (vcvtph2ps) as they are loaded.
extern const MatmulKernel kMatmulF16Avx512;
// BF16 weights x activations rounded to BF16 with vdpbf16ps (pairs of exact bf16 products
// accumulated in F32). Note vdpbf16ps treats BF16 subnormals as zero.
extern const MatmulKernel kMatmulBf16Avx512;
// F16 weights rounded to BF16 at load, x activations rounded to BF16, with vdpbf16ps: twice
// the FP32 FMA rate for prefill, at BF16 accuracy (an opt-in: ModelOptions::f16_as_bf16; never
// chosen by find_matmul_kernel).
extern const MatmulKernel kMatmulF16AsBf16Avx512;
// F32 weights x F32 activations.
extern const MatmulKernel kMatmulF32Avx512;

}  // namespace lumen
