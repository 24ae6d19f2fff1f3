// AVX-512 element-wise ops (kernels/ops.h): kernels/generic/ops.h over avx512::Vf.
#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/ops.h"
#include "kernels/generic/quantize_act.h"
#include "kernels/ops_isa.h"

namespace lumen {

using avx512::Vf;
const OpsTable kOpsAvx512 = {"avx512", generic_ops::rms_norm<Vf>, generic_ops::rope<Vf>, generic_ops::softmax<Vf>,
                             generic_ops::swiglu<Vf>, generic_ops::geglu<Vf>, generic_ops::soft_cap<Vf>, generic_ops::vec_add<Vf>,
                             generic_ops::to_half<Vf, false>, generic_ops::to_half<Vf, true>,
                             quantize_act::q8_0_blocks<Vf>};

}  // namespace lumen
