// Q4_0 x Q8_0 on AVX2: unsigned nibbles straight into vpmaddubsw, s16 sums over the whole
// block, one vpmaddwd per block; the activation correction -8 * sum(a) undoes the offset 8.
#include "kernels/avx2/matmul_q4_avx2.h"

#include "kernels/avx2/matmul_q32_avx2_core.h"

namespace lumen {

namespace {

void pack_q32(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/false); }

}  // namespace

const MatmulKernel kMatmulQ4_0Avx2 = {
    "q4_0/avx2", GgmlType::Q4_0, Isa::Avx2, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx2<8, false>, q32_compute_avx2<Avx2FmtQ4_0>,
};

// Q4_1 x Q8_1: x = d*q + m, so the block is d_w*d_a*dot(q, a) + m_w*s_a (s_a = d_a*sum(a),
// from the activation conversion); the nibbles need no offset.
const MatmulKernel kMatmulQ4_1Avx2 = {
    "q4_1/avx2", GgmlType::Q4_1, Isa::Avx2, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx2<0, true>, q32_compute_avx2<Avx2FmtQ4_1>,
};

}  // namespace lumen
