// Q8_K activation quantization for the K-quant kernels (kquant_pack.h's kAct* layout), written
// once over an ISA's SIMD layer V. Every step repeats the reference's float operations
// (core/quant/quant_ref_kquants.cpp, from_float_q8_k) so the bytes are identical: amax ignores
// NaN like `fabs(x) > amax` does (V::max returns its second operand when either is NaN), the
// first element of largest magnitude supplies the sign, iscale = -127 / max,
// q = min(127, round_half_even(iscale * x)) (V::min also returns 127 for a NaN product, like
// std::min(127.0f, NaN)), d = 1 / iscale. The block is read again from L1 at each pass rather
// than held: AVX2's 16 registers could not hold it.
// The group sums and the ActCorr corrections come from Sums::block(dst, corr_mul), the ISA's
// own: they are laid out for its dot product.
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kquant_pack.h"

namespace lumen::kquant::quantize_q8k {
namespace {

template <class V, class Sums>
void block(const float* x, uint8_t* dst, int corr_mul) {
  constexpr int kN = kBlock / V::kLanes;
  typename V::F amax_v = V::zero();
  for (int j = 0; j < kN; j++) amax_v = V::max(V::abs(V::loadu(x + V::kLanes * j)), amax_v);
  const float amax = V::hmax(amax_v);  // lanes are never NaN
  if (!(amax > 0.0f)) {
    std::memset(dst, 0, corr_mul != 0 ? kActBlockBytesCorr : kActBlockBytes);
    return;
  }
  const typename V::F amax_b = V::set1(amax);
  int idx = 0;
  for (int j = 0; j < kN; j++) {
    const unsigned eq = V::eq_mask(V::abs(V::loadu(x + V::kLanes * j)), amax_b);
    if (eq) {
      idx = V::kLanes * j + __builtin_ctz(eq);
      break;
    }
  }
  const float iscale = -127.0f / x[idx];
  const typename V::F vis = V::set1(iscale), c127 = V::set1(127.0f);
  for (int j = 0; j < kBlock / 32; j++) {
    typename V::I q[32 / V::kLanes];
    for (int i = 0; i < 32 / V::kLanes; i++)
      q[i] = V::trunc_i(V::min(V::round_even(V::mul(vis, V::loadu(x + 32 * j + V::kLanes * i))), c127));
    V::store_i8x32(reinterpret_cast<int8_t*>(dst + kActQs + 32 * j), q);
  }
  Sums::block(dst, corr_mul);
  const float d = 1.0f / iscale;
  std::memcpy(dst + kActD, &d, 4);
  std::memset(dst + kActD + 4, 0, kActBlockBytes - kActD - 4);
}

// One activation row (n_in a multiple of 256), corrections when corr_mul != 0.
template <class V, class Sums>
void row(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
  const size_t bb = corr_mul != 0 ? kActBlockBytesCorr : kActBlockBytes;
  for (int64_t b = 0; b < n_in / kBlock; b++)
    block<V, Sums>(x + b * kBlock, dst + static_cast<size_t>(b) * bb, corr_mul);
}

}  // namespace
}  // namespace lumen::kquant::quantize_q8k
