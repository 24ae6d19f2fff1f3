// Q4_K and Q5_K x Q8_K matmuls, AVX2: kernels/generic/kq_nibbles.h over avx2::Kq (8-row groups,
// vpmaddubsw int16 pair sums widened by vpmaddwd with the sub-block scale; a tile is 8 rows x
// 1..2 tokens, the most the 16 YMM registers hold).
#include "kernels/avx2/matmul_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/generic/kq_nibbles.h"

namespace lumen {

using Q4KAvx2 = kquant::K4<kquant::avx2::Kq, false>;
using Q5KAvx2 = kquant::K4<kquant::avx2::Kq, true>;

const MatmulKernel kMatmulQ4_KAvx2 = {"q4_K/avx2",         GgmlType::Q4_K,   Isa::Avx2,
                                      Q4KAvx2::kRows,      kquant::avx2::Kq::pack, kquant::act_row_bytes_plain,
                                      Q4KAvx2::convert,    Q4KAvx2::compute};
const MatmulKernel kMatmulQ5_KAvx2 = {"q5_K/avx2",         GgmlType::Q5_K,   Isa::Avx2,
                                      Q5KAvx2::kRows,      kquant::avx2::Kq::pack, kquant::act_row_bytes_plain,
                                      Q5KAvx2::convert,    Q5KAvx2::compute};

}  // namespace lumen
