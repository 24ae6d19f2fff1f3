// Q3_K x Q8_K matmul, AVX-512 VNNI: kernels/generic/kq_slices.h over avx512::Kq (16-row
// groups, vpdpbusd int32 sums starting at ActCorr::Int32, times the group scale; the high bit
// joins the low two in one vpternlogd; a tile is 16 rows x 1..4 tokens).
#include "kernels/avx512/matmul_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/generic/kq_slices.h"

namespace lumen {

using Q3KAvx512 = kquant::SlicesKernel<kquant::avx512::Kq, kquant::Q3K>;

const MatmulKernel kMatmulQ3_KAvx512 = {"q3_K/avx512-vnni",       GgmlType::Q3_K,     Isa::Avx512,
                                        kquant::avx512::Kq::kRows, kquant::avx512::Kq::pack, kquant::act_row_bytes_corr,
                                        Q3KAvx512::convert,       Q3KAvx512::compute};

}  // namespace lumen
