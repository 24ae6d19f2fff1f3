// Q3_K x Q8_K matmul, AVX2: kernels/generic/kq_slices.h over avx2::Kq (8-row groups,
// vpmaddubsw int16 pair sums starting at ActCorr::Pairs16, widened by vpmaddwd with the group
// scale; a tile is 8 rows x 1..2 tokens).
#include "kernels/avx2/matmul_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/generic/kq_slices.h"

namespace lumen {

using Q3KAvx2 = kquant::SlicesKernel<kquant::avx2::Kq, kquant::Q3K>;

const MatmulKernel kMatmulQ3_KAvx2 = {"q3_K/avx2",          GgmlType::Q3_K,   Isa::Avx2,
                                      kquant::avx2::Kq::kRows, kquant::avx2::Kq::pack, kquant::act_row_bytes_corr,
                                      Q3KAvx2::convert,     Q3KAvx2::compute};

}  // namespace lumen
