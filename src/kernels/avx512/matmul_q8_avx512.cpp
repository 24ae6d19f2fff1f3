// Q8_0 x Q8_0 on AVX-512 VNNI: weights repacked as q+128 (u8) in 16-row chunk layout, so
// vpdpbusd multiplies them with the signed activations; the block's activation sum times -128
// (computed once per token) undoes the offset exactly.
#include "kernels/avx512/matmul_q8_avx512.h"

#include "kernels/avx512/matmul_q32_avx512_core.h"

namespace lumen {

namespace {

void pack_q8_0(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/true); }

}  // namespace

const MatmulKernel kMatmulQ8_0Avx512 = {
    "q8_0/avx512-vnni", GgmlType::Q8_0, Isa::Avx512, kQ32GroupRows, pack_q8_0, q32_act_row_bytes,
    q32_convert_act_avx512<128, false>, q32_compute_avx512<Q32FmtQ8_0>,
};

}  // namespace lumen
