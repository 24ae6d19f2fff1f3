// Q4_0 x Q8_0 on AVX-512 VNNI: the nibbles are already unsigned (q = 0..15 for x = d*(q-8)),
// so vpdpbusd takes them as they are after one AND / shift+AND per 64 bytes, and the
// activation correction -8 * sum(a) undoes the offset 8.
#include "kernels/avx512/matmul_q4_avx512.h"

#include "kernels/avx512/matmul_q32_avx512_core.h"

namespace lumen {

namespace {

void pack_q32(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/true); }

}  // namespace

const MatmulKernel kMatmulQ4_0Avx512 = {
    "q4_0/avx512-vnni", GgmlType::Q4_0, Isa::Avx512, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx512<8, false>, q32_compute_avx512<Q32FmtQ4_0>,
};

// Q4_1 x Q8_1: x = d*q + m, so the block is d_w*d_a*dot(q, a) + m_w*s_a (s_a = d_a*sum(a),
// from the activation conversion); the nibbles need no offset.
const MatmulKernel kMatmulQ4_1Avx512 = {
    "q4_1/avx512-vnni", GgmlType::Q4_1, Isa::Avx512, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx512<0, true>, q32_compute_avx512<Q32FmtQ4_1>,
};

}  // namespace lumen
