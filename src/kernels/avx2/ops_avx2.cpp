// AVX2 element-wise ops (kernels/ops.h): kernels/generic/ops.h over avx2::Vf.
#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/ops.h"
#include "kernels/generic/quantize_act.h"
#include "kernels/ops_isa.h"

namespace lumen {

using avx2::Vf;
const OpsTable kOpsAvx2 = {"avx2", generic_ops::rms_norm<Vf>, generic_ops::rope<Vf>, generic_ops::softmax<Vf>,
                           generic_ops::swiglu<Vf>, generic_ops::geglu<Vf>, generic_ops::soft_cap<Vf>, generic_ops::vec_add<Vf>,
                           generic_ops::to_half<Vf, false>, generic_ops::to_half<Vf, true>,
                           quantize_act::q8_0_blocks<Vf>};

}  // namespace lumen
