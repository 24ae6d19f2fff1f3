// The registered per-ISA matmul kernels. To add one: declare it in its ISA folder's header and
// list it here. Lookup takes the first entry for the type whose ISA the caller allows, so list
// the best kernels first.
#include <vector>

#include "kernels/avx2/matmul_float_avx2.h"
#include "kernels/avx2/matmul_iq4nl_avx2.h"
#include "kernels/avx2/matmul_q2k_avx2.h"
#include "kernels/avx2/matmul_q3k_avx2.h"
#include "kernels/avx2/matmul_q4_avx2.h"
#include "kernels/avx2/matmul_q4k_avx2.h"
#include "kernels/avx2/matmul_q5_avx2.h"
#include "kernels/avx2/matmul_q6k_avx2.h"
#include "kernels/avx2/matmul_q8_avx2.h"
#include "kernels/avx512/matmul_float_avx512.h"
#include "kernels/avx512/matmul_iq4nl_avx512.h"
#include "kernels/avx512/matmul_q2k_avx512.h"
#include "kernels/avx512/matmul_q3k_avx512.h"
#include "kernels/avx512/matmul_q4_avx512.h"
#include "kernels/avx512/matmul_q4k_avx512.h"
#include "kernels/avx512/matmul_q5_avx512.h"
#include "kernels/avx512/matmul_q6k_avx512.h"
#include "kernels/avx512/matmul_q8_avx512.h"
#include "kernels/matmul_kernel.h"
#include "kernels/ref/matmul_ref.h"

namespace lumen {

namespace {

const std::vector<const MatmulKernel*>& registered() {
  static const std::vector<const MatmulKernel*> table = {
      // e.g. &kMatmulQ8_0Avx512,
      &kMatmulQ8_0Avx512,
      &kMatmulQ4_0Avx512,
      &kMatmulQ4_1Avx512,
      &kMatmulQ5_0Avx512,
      &kMatmulQ5_1Avx512,
      &kMatmulIq4NlAvx512,
      &kMatmulQ8_0Avx2,
      &kMatmulQ4_0Avx2,
      &kMatmulQ4_1Avx2,
      &kMatmulQ5_0Avx2,
      &kMatmulQ5_1Avx2,
      &kMatmulIq4NlAvx2,
      &kMatmulQ4_KAvx512,
      &kMatmulQ6_KAvx512,
      &kMatmulQ4_KAvx2,
      &kMatmulQ6_KAvx2,
      &kMatmulF16Avx512, &kMatmulBf16Avx512, &kMatmulF32Avx512,
      &kMatmulF16Avx2, &kMatmulBf16Avx2, &kMatmulF32Avx2,
      &kMatmulQ5_KAvx512,
      &kMatmulQ3_KAvx512,
      &kMatmulQ2_KAvx512,
      &kMatmulQ5_KAvx2,
      &kMatmulQ3_KAvx2,
      &kMatmulQ2_KAvx2,
  };
  return table;
}

}  // namespace

const MatmulKernel* find_f16_as_bf16_kernel(Isa isa) {
  return static_cast<int>(isa) >= static_cast<int>(Isa::Avx512) ? &kMatmulF16AsBf16Avx512 : nullptr;
}

const MatmulKernel* find_matmul_kernel(GgmlType type, Isa isa) {
  for (const MatmulKernel* k : registered())
    if (k->weight_type == type && static_cast<int>(k->isa) <= static_cast<int>(isa)) return k;
  return reference_matmul_kernel(type);
}

}  // namespace lumen
