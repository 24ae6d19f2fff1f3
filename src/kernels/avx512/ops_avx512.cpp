// AVX-512 element-wise ops (kernels/ops.h): kernels/generic/ops.h over avx512::Vf.
#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/ops.h"

namespace lumen {

const OpsTable kOpsAvx512 = generic_ops::table<avx512::Vf>("avx512");

}  // namespace lumen
