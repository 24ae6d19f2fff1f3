// The AVX-512 (F/BW/VL/DQ + VNNI + BF16) matmul kernels, all in one list; matmul_dispatch.cpp
// files them in the (weight type, ISA) table. Each is defined in this folder by the translation
// unit of its family: matmul_float_avx512.cpp (kernels/generic/matmul_float.h),
// matmul_q32_avx512.cpp (32-element blocks), matmul_kq_slices_avx512.cpp and
// matmul_kq_nibbles_avx512.cpp (K-quants, kernels/generic/kq_slices.h and kq_nibbles.h).
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

// Float weights: panels of 64 rows stored k-major, 64 rows x 6 tokens per register tile. The
// same tile serves decode and prefill, so a (row, token) result does not depend on the batch.
extern const MatmulKernel kMatmulF32Avx512;
// F32 in panels of 16 rows (one vector), for matrices of a few dozen rows (find_matmul_kernel_for).
extern const MatmulKernel kMatmulF32NarrowAvx512;
// F16 weights x activations rounded to F16 (products exact in F32, F32 accumulation); the
// weights are widened in registers (vcvtph2ps) as they are loaded.
extern const MatmulKernel kMatmulF16Avx512;
// BF16 weights x activations rounded to BF16 with vdpbf16ps (pairs of exact bf16 products
// accumulated in F32). Note vdpbf16ps treats BF16 subnormals as zero.
extern const MatmulKernel kMatmulBf16Avx512;
// F16 weights rounded to BF16 at load, x activations rounded to BF16, with vdpbf16ps: twice
// the FP32 FMA rate for prefill, at BF16 accuracy (an opt-in: ModelOptions::f16_as_bf16; never
// filed in the dispatch table: it changes the results).
extern const MatmulKernel kMatmulF16AsBf16Avx512;

// 32-element blocks x Q8_0 (Q8_1 for the formats with a minimum) activations, with vpdpbusd.
extern const MatmulKernel kMatmulQ8_0Avx512;
extern const MatmulKernel kMatmulQ4_0Avx512;
extern const MatmulKernel kMatmulQ4_1Avx512;
extern const MatmulKernel kMatmulQ5_0Avx512;
extern const MatmulKernel kMatmulQ5_1Avx512;
extern const MatmulKernel kMatmulIq4NlAvx512;

// K-quants x Q8_K activations.
extern const MatmulKernel kMatmulQ2_KAvx512;
extern const MatmulKernel kMatmulQ3_KAvx512;
extern const MatmulKernel kMatmulQ4_KAvx512;
extern const MatmulKernel kMatmulQ5_KAvx512;
extern const MatmulKernel kMatmulQ6_KAvx512;

}  // namespace lumen
