// Q5_0 / Q5_1 on AVX2: the low nibbles as in Q4_0; the fifth bits, stored as bit masks per
// chunk vector, are spread to bytes (shuffle, test, and) and ORed in as bit 4 of the unsigned
// quant. Q5_0's offset 16 is undone by the activation correction -16 * sum(a); Q5_1 adds
// m_w * s_a per block.
#include "kernels/avx2/matmul_q5_avx2.h"

#include "kernels/avx2/matmul_q32_avx2_core.h"

namespace lumen {

namespace {

void pack_q32(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/false); }

}  // namespace

const MatmulKernel kMatmulQ5_0Avx2 = {
    "q5_0/avx2", GgmlType::Q5_0, Isa::Avx2, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx2<16, false>, q32_compute_avx2<Avx2FmtQ5_0>,
};

const MatmulKernel kMatmulQ5_1Avx2 = {
    "q5_1/avx2", GgmlType::Q5_1, Isa::Avx2, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx2<0, true>, q32_compute_avx2<Avx2FmtQ5_1>,
};

}  // namespace lumen
