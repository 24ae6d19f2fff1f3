// Q5_0 / Q5_1 on AVX-512 VNNI: the low nibbles as in Q4_0; the fifth bits, stored as 64-bit
// masks per chunk vector, set bit 4 of the unsigned quant with one masked byte add. Q5_0's
// offset 16 is undone by the activation correction -16 * sum(a); Q5_1 adds m_w * s_a per block.
#include "kernels/avx512/matmul_q5_avx512.h"

#include "kernels/avx512/matmul_q32_avx512_core.h"

namespace lumen {

namespace {

void pack_q32(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/true); }

}  // namespace

const MatmulKernel kMatmulQ5_0Avx512 = {
    "q5_0/avx512-vnni", GgmlType::Q5_0, Isa::Avx512, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx512<16, false>, q32_compute_avx512<Q32FmtQ5_0>,
};

const MatmulKernel kMatmulQ5_1Avx512 = {
    "q5_1/avx512-vnni", GgmlType::Q5_1, Isa::Avx512, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx512<0, true>, q32_compute_avx512<Q32FmtQ5_1>,
};

}  // namespace lumen
