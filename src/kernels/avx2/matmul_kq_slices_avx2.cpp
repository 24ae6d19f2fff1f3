// The K-quant families over kernels/generic/kq_slices.h on AVX2: Q2_K, Q3_K and Q6_K x Q8_K, each
// kquant::SlicesKernel over avx2::Kq (8-row groups, vpmaddubsw int16 pair sums widened by
// vpmaddwd with the group scale; Q3_K and Q6_K start them at ActCorr::Pairs16, the activation
// correction that undoes their offset). A tile is 8 rows x 1..2 tokens, the most the 16 YMM
// registers hold.
#include "kernels/avx2/matmul_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/generic/kq_slices.h"

namespace lumen {

namespace {
template <class Fmt>
using Slices = kquant::SlicesKernel<kquant::avx2::Kq, Fmt>;
using kquant::avx2::Kq;
}  // namespace

const MatmulKernel kMatmulQ2_KAvx2 = {"q2_K/avx2", GgmlType::Q2_K, Isa::Avx2, Kq::kRows, Kq::pack,
                                      kquant::act_row_bytes_plain, Slices<kquant::Q2K>::convert,
                                      Slices<kquant::Q2K>::compute};
const MatmulKernel kMatmulQ3_KAvx2 = {"q3_K/avx2", GgmlType::Q3_K, Isa::Avx2, Kq::kRows, Kq::pack,
                                      kquant::act_row_bytes_corr, Slices<kquant::Q3K>::convert,
                                      Slices<kquant::Q3K>::compute};
const MatmulKernel kMatmulQ6_KAvx2 = {"q6_K/avx2", GgmlType::Q6_K, Isa::Avx2, Kq::kRows, Kq::pack,
                                      kquant::act_row_bytes_corr, Slices<kquant::Q6K>::convert,
                                      Slices<kquant::Q6K>::compute};

}  // namespace lumen
