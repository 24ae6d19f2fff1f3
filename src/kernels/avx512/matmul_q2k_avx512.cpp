// Q2_K x Q8_K matmul, AVX-512 VNNI: kernels/generic/kq_slices.h over avx512::Kq (16-row
// groups, vpdpbusd int32 sums times the group scale, minimums through vpdpwssd; a tile is 16
// rows x 1..4 tokens, every weight vector feeding T tokens).
#include "kernels/avx512/matmul_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/generic/kq_slices.h"

namespace lumen {

using Q2KAvx512 = kquant::SlicesKernel<kquant::avx512::Kq, kquant::Q2K>;

const MatmulKernel kMatmulQ2_KAvx512 = {"q2_K/avx512-vnni",       GgmlType::Q2_K,     Isa::Avx512,
                                        kquant::avx512::Kq::kRows, kquant::avx512::Kq::pack, kquant::act_row_bytes_plain,
                                        Q2KAvx512::convert,       Q2KAvx512::compute};

}  // namespace lumen
