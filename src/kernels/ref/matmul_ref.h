// The scalar reference matmul kernel for every weight type with a vec_dot: the file's own row
// layout, activations converted by the traits table's from_float, one vec_dot per output.
#pragma once

#include "kernels/matmul_kernel.h"

namespace lumen {

const MatmulKernel* reference_matmul_kernel(GgmlType type);  // nullptr without vec_dot

}  // namespace lumen
