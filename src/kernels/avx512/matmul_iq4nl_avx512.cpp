// IQ4_NL x Q8_0 on AVX-512 VNNI: a byte shuffle maps each nibble to its level + 128 (1..241,
// unsigned), and the activation correction -128 * sum(a) removes the 128.
#include "kernels/avx512/matmul_iq4nl_avx512.h"

#include "kernels/avx512/matmul_q32_avx512_core.h"

namespace lumen {

namespace {

void pack_q32(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/true); }

}  // namespace

const MatmulKernel kMatmulIq4NlAvx512 = {
    "iq4_nl/avx512-vnni", GgmlType::IQ4_NL, Isa::Avx512, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx512<128, false>, q32_compute_avx512<Q32FmtIq4nl>,
};

}  // namespace lumen
