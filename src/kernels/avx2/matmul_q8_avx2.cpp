// Q8_0 x Q8_0 on AVX2: weights kept signed in the 16-row chunk layout; vpmaddubsw takes
// |w| and the activation with w's sign (no saturation: |w| <= 128, |a| <= 127).
#include "kernels/avx2/matmul_q8_avx2.h"

#include "kernels/avx2/matmul_q32_avx2_core.h"

namespace lumen {

namespace {

void pack_q8_0(const WeightMatrix& w, PackedWeights& out) { q32_pack(w, out, /*q8_biased=*/false); }

}  // namespace

const MatmulKernel kMatmulQ8_0Avx2 = {
    "q8_0/avx2", GgmlType::Q8_0, Isa::Avx2, kQ32GroupRows, pack_q8_0, q32_act_row_bytes,
    q32_convert_act_avx2<0, false>, q32_compute_avx2<Avx2FmtQ8_0>,
};

}  // namespace lumen
