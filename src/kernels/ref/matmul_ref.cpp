#include "kernels/ref/matmul_ref.h"

#include <array>
#include <cstring>

#include "kernels/matmul.h"

namespace lumen {

namespace {

void pack_view(const WeightMatrix& w, PackedWeights& out) {
  out.data = w.data;
  out.bytes = w.row_bytes * static_cast<size_t>(w.n_out);
}

template <GgmlType T>
size_t act_bytes(int64_t n_in) {
  return row_size(type_traits(T).vec_dot_type, n_in);
}

template <GgmlType T>
void convert(const float* x, uint8_t* dst, int64_t n_in) {
  const TypeTraits& at = type_traits(type_traits(T).vec_dot_type);
  if (at.type == GgmlType::F32) std::memcpy(dst, x, static_cast<size_t>(n_in) * sizeof(float));
  else at.from_float(x, dst, n_in);
}

template <GgmlType T>
void compute(const WeightMatrix& w, const uint8_t* act, size_t act_stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const VecDotFn dot = type_traits(T).vec_dot;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* wr = w.row(r);
    for (int64_t t = 0; t < n_tokens; t++) y[t * ldy + r] = dot(w.n_in, wr, act + t * act_stride);
  }
}

template <GgmlType T>
constexpr MatmulKernel make() {
  return MatmulKernel{"reference", T, Isa::Scalar, 1, pack_view, act_bytes<T>, convert<T>, compute<T>};
}

constexpr std::array kKernels = {
    make<GgmlType::F32>(),  make<GgmlType::F16>(),  make<GgmlType::BF16>(), make<GgmlType::Q4_0>(),
    make<GgmlType::Q4_1>(), make<GgmlType::Q5_0>(), make<GgmlType::Q5_1>(), make<GgmlType::Q8_0>(),
    make<GgmlType::Q2_K>(), make<GgmlType::Q3_K>(), make<GgmlType::Q4_K>(), make<GgmlType::Q5_K>(),
    make<GgmlType::Q6_K>(), make<GgmlType::IQ4_NL>(),
};

}  // namespace

const MatmulKernel* reference_matmul_kernel(GgmlType type) {
  for (const MatmulKernel& k : kKernels)
    if (k.weight_type == type) return &k;
  return nullptr;
}

}  // namespace lumen
