// Q2_K x Q8_K matmul, AVX2: kernels/generic/kq_slices.h over avx2::Kq (8-row groups,
// vpmaddubsw int16 pair sums widened by vpmaddwd with the group scale; a tile is 8 rows x 1..2
// tokens, the most the 16 YMM registers hold).
#include "kernels/avx2/matmul_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/generic/kq_slices.h"

namespace lumen {

using Q2KAvx2 = kquant::SlicesKernel<kquant::avx2::Kq, kquant::Q2K>;

const MatmulKernel kMatmulQ2_KAvx2 = {"q2_K/avx2",          GgmlType::Q2_K,   Isa::Avx2,
                                      kquant::avx2::Kq::kRows, kquant::avx2::Kq::pack, kquant::act_row_bytes_plain,
                                      Q2KAvx2::convert,     Q2KAvx2::compute};

}  // namespace lumen
