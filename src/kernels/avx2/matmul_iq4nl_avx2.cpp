// IQ4_NL x Q8_0 on AVX2: byte shuffles map each nibble to its signed level and to its
// magnitude, which meet the activations through the sign trick (no offset).
#include "kernels/avx2/matmul_iq4nl_avx2.h"

#include "kernels/avx2/matmul_q32_avx2_core.h"

namespace lumen {

namespace {

void pack_q32(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/false); }

}  // namespace

const MatmulKernel kMatmulIq4NlAvx2 = {
    "iq4_nl/avx2", GgmlType::IQ4_NL, Isa::Avx2, kQ32GroupRows, pack_q32, q32_act_row_bytes,
    q32_convert_act_avx2<0, false>, q32_compute_avx2<Avx2FmtIq4nl>,
};

}  // namespace lumen
