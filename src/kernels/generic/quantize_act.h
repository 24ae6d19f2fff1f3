// Activation rows quantized for the 32-element block kernels (kernels/quant_pack.h's
// Q32ActBlock), written once over an ISA's SIMD layer V (avx2::Vf, avx512::Vf) and
// bit-identical to the reference from_float_q8_0 / q8_1: d = amax / 127, q = x * (127 / amax)
// rounded ties-to-even and clamped to [-128, 127], d (and Q8_1's s = d * sum(q)) rounded to F16.
// amax ignores NaN lanes (V::max returns its second operand when either is NaN).
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstdint>

#include "kernels/quant_pack.h"

namespace lumen::quantize_act {
namespace {

// kQ8_1 false: the Q8_0 family, whose block correction is corr = -kBias * sum(q) (undoing the
// weights' unsigned offset kBias); kQ8_1 true: s = fp16(d * sum(q)).
template <class V, int kBias, bool kQ8_1>
void q32(const float* x, uint8_t* dst, int64_t n_in) {
  constexpr int kN = kQ32Block / V::kLanes;
  auto* out = reinterpret_cast<Q32ActBlock*>(dst);
  for (int64_t b = 0; b < n_in / kQ32Block; b++, x += kQ32Block) {
    typename V::F v[kN];
    typename V::F m = V::zero();
    for (int i = 0; i < kN; i++) {
      v[i] = V::loadu(x + V::kLanes * i);
      m = V::max(V::abs(v[i]), m);
    }
    const float amax = V::hmax(m);
    const float d = amax / 127.0f;
    const typename V::F id = V::set1(amax != 0.0f ? 127.0f / amax : 0.0f);
    typename V::I q[kN];
    typename V::I sum = V::zero_i();
    for (int i = 0; i < kN; i++) {
      q[i] = V::to_i8_range(V::mul(v[i], id));
      sum = V::add_i(sum, q[i]);
    }
    V::store_i8x32(out[b].qs, q);
    out[b].d = V::first(V::round_f16(V::set1(d)));
    if constexpr (kQ8_1) out[b].s = V::first(V::round_f16(V::set1(d * static_cast<float>(V::hsum_i(sum)))));
    else out[b].corr = -kBias * V::hsum_i(sum);
  }
}

}  // namespace
}  // namespace lumen::quantize_act
