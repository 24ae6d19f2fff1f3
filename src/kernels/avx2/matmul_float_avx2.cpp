// AVX2 float-weight matmul kernels (see the header): kernels/generic/matmul_float.h over
// avx2::FloatMm.
#include "kernels/avx2/matmul_avx2.h"

#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/matmul_float.h"

namespace lumen {
namespace avx2 {
namespace {

// 16 YMM registers: a tile of 32 rows x 3 tokens (12 accumulators). F16/BF16 panels are widened
// in registers while streaming (few tokens) or, from 6 tokens, once per k-block into an
// L1-resident F32 buffer (32 KiB: 256 k-steps of 32 rows) reused by every token tile.
struct FloatMm : Vf {
  static constexpr int kTokens = 3;
  static constexpr size_t kBlockBytes = 32 * 1024;
  static constexpr int64_t kWidenMinTokens = 6;
};
using K = float_mm::Kernels<FloatMm>;
using KNarrow = float_mm::Kernels<FloatMm, 1>;
using float_mm::Src;

}  // namespace
}  // namespace avx2

using avx2::K;
using avx2::KNarrow;
const MatmulKernel kMatmulF16Avx2 = {"f16/avx2",      GgmlType::F16, Isa::Avx2, K::kNR, K::pack_half, K::act_bytes,
                                     K::convert_rounded<avx2::Vf::round_f16>, K::compute<avx2::Src::F16>};
const MatmulKernel kMatmulBf16Avx2 = {"bf16/avx2",    GgmlType::BF16, Isa::Avx2, K::kNR, K::pack_half, K::act_bytes,
                                      K::convert_rounded<avx2::Vf::round_bf16>, K::compute<avx2::Src::Bf16>};
const MatmulKernel kMatmulF32Avx2 = {"f32/avx2",      GgmlType::F32, Isa::Avx2, K::kNR, K::pack_f32, K::act_bytes,
                                     K::convert_f32,  K::compute<avx2::Src::F32>};
const MatmulKernel kMatmulF32NarrowAvx2 = {"f32-narrow/avx2", GgmlType::F32, Isa::Avx2, KNarrow::kNR, KNarrow::pack_f32,
                                          KNarrow::act_bytes, KNarrow::convert_f32, KNarrow::compute<avx2::Src::F32>};

}  // namespace lumen
