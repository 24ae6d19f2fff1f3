// AVX2 element-wise ops (kernels/ops.h): kernels/generic/ops.h over avx2::Vf.
#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/ops.h"

namespace lumen {

const OpsTable kOpsAvx2 = generic_ops::table<avx2::Vf>("avx2");

}  // namespace lumen
