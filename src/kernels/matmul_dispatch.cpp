// The matmul dispatch table: for each (weight type, ISA), the kernel written for exactly that
// pair, or none. To add a kernel: declare it in its ISA folder's matmul_<isa>.h and list it in
// kKernels (the list's order means nothing: each entry files itself under its own type and
// ISA). Lookup walks down from the requested ISA to the first level with a kernel for the type,
// then falls back to the scalar reference kernel.
#include <array>
#include <cstdio>
#include <cstdlib>

#include "kernels/avx2/matmul_avx2.h"
#include "kernels/avx512/matmul_avx512.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernel.h"
#include "kernels/ref/matmul_ref.h"

namespace lumen {

namespace {

constexpr const MatmulKernel* kKernels[] = {
    &kMatmulF32Avx2,    &kMatmulF16Avx2,    &kMatmulBf16Avx2,                                               //
    &kMatmulQ8_0Avx2,   &kMatmulQ4_0Avx2,   &kMatmulQ4_1Avx2,   &kMatmulQ5_0Avx2,   &kMatmulQ5_1Avx2,    //
    &kMatmulIq4NlAvx2,                                                                                     //
    &kMatmulQ2_KAvx2,   &kMatmulQ3_KAvx2,   &kMatmulQ4_KAvx2,   &kMatmulQ5_KAvx2,   &kMatmulQ6_KAvx2,    //
    &kMatmulF32Avx512,  &kMatmulF16Avx512,  &kMatmulBf16Avx512,                                            //
    &kMatmulQ8_0Avx512, &kMatmulQ4_0Avx512, &kMatmulQ4_1Avx512, &kMatmulQ5_0Avx512, &kMatmulQ5_1Avx512,  //
    &kMatmulIq4NlAvx512,                                                                                   //
    &kMatmulQ2_KAvx512, &kMatmulQ3_KAvx512, &kMatmulQ4_KAvx512, &kMatmulQ5_KAvx512, &kMatmulQ6_KAvx512,  //
};

constexpr size_t kTypeSlots = 64;  // above every GgmlType value
constexpr size_t kIsaSlots = static_cast<size_t>(Isa::Avx512) + 1;
using Table = std::array<std::array<const MatmulKernel*, kIsaSlots>, kTypeSlots>;

// Built once, on first use. Two kernels for one (type, ISA), or a type beyond the table, is a
// programming error caught by the first matmul of any test.
const Table& table() {
  static const Table t = [] {
    Table built{};
    for (const MatmulKernel* k : kKernels) {
      const auto type = static_cast<size_t>(k->weight_type), isa = static_cast<size_t>(k->isa);
      if (type >= kTypeSlots || isa >= kIsaSlots || built[type][isa] != nullptr) {
        std::fprintf(stderr, "lumen: matmul kernel %s: its (type, ISA) slot is taken or out of range\n", k->name);
        std::abort();
      }
      built[type][isa] = k;
    }
    return built;
  }();
  return t;
}

}  // namespace

const MatmulKernel* find_f16_as_bf16_kernel(Isa isa) {
  return static_cast<int>(isa) >= static_cast<int>(Isa::Avx512) ? &kMatmulF16AsBf16Avx512 : nullptr;
}

const MatmulKernel* find_matmul_kernel(GgmlType type, Isa isa) {
  const auto t = static_cast<size_t>(type);
  if (t < kTypeSlots)
    for (int i = static_cast<int>(isa); i > static_cast<int>(Isa::Scalar); i--)
      if (const MatmulKernel* k = table()[t][static_cast<size_t>(i)]) return k;
  return reference_matmul_kernel(type);
}

const MatmulKernel* find_matmul_kernel_for(const WeightMatrix& w, Isa isa) {
  const MatmulKernel* k = find_matmul_kernel(w.type, isa);
  if (w.type == GgmlType::F32 && w.n_out <= 64 && k != nullptr) {
    if (k->isa == Isa::Avx512) return &kMatmulF32NarrowAvx512;
    if (k->isa == Isa::Avx2) return &kMatmulF32NarrowAvx2;
  }
  return k;
}

}  // namespace lumen
