// Activation rows quantized for the 32-element block kernels (kernels/quant_pack.h's
// Q32ActBlock), and ggml's Q8_0 blocks for the Q8_0 KV cache, written once over an ISA's SIMD
// layer V (avx2::Vf, avx512::Vf) and bit-identical to the reference from_float_q8_0 / q8_1:
// d = amax / 127, q = x * (127 / amax) rounded ties-to-even and clamped to [-128, 127], d (and
// Q8_1's s = d * sum(q)) rounded to F16.
// amax ignores NaN lanes (V::max returns its second operand when either is NaN).
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/quant_pack.h"

namespace lumen::quantize_act {
namespace {

// One block of 32 values at x: its quants to qs, d (before its F16 rounding) returned, the
// quants' sum to *sum. Inlined into its callers, as the loop body it was.
template <class V>
inline __attribute__((always_inline)) float block(const float* x, int8_t* qs, int32_t* sum) {
  constexpr int kN = kQ32Block / V::kLanes;
  typename V::F v[kN];
  typename V::F m = V::zero();
  for (int i = 0; i < kN; i++) {
    v[i] = V::loadu(x + V::kLanes * i);
    m = V::max(V::abs(v[i]), m);
  }
  const float amax = V::hmax(m);
  const typename V::F id = V::set1(amax != 0.0f ? 127.0f / amax : 0.0f);
  typename V::I q[kN];
  typename V::I s = V::zero_i();
  for (int i = 0; i < kN; i++) {
    q[i] = V::to_i8_range(V::mul(v[i], id));
    s = V::add_i(s, q[i]);
  }
  V::store_i8x32(qs, q);
  *sum = V::hsum_i(s);
  return amax / 127.0f;
}

// kQ8_1 false: the Q8_0 family, whose block correction is corr = -kBias * sum(q) (undoing the
// weights' unsigned offset kBias); kQ8_1 true: s = fp16(d * sum(q)).
template <class V, int kBias, bool kQ8_1>
void q32(const float* x, uint8_t* dst, int64_t n_in) {
  auto* out = reinterpret_cast<Q32ActBlock*>(dst);
  for (int64_t b = 0; b < n_in / kQ32Block; b++, x += kQ32Block) {
    int32_t sum = 0;
    const float d = block<V>(x, out[b].qs, &sum);
    out[b].d = V::first(V::round_f16(V::set1(d)));
    if constexpr (kQ8_1) out[b].s = V::first(V::round_f16(V::set1(d * static_cast<float>(sum))));
    else out[b].corr = -kBias * sum;
  }
}

// n values (a multiple of 32) as ggml's Q8_0 blocks (F16 d, 32 quants): the Q8_0 KV cache's
// store, bit for bit from_float_q8_0.
template <class V>
void q8_0_blocks(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQ32Block; b++, x += kQ32Block, out += 2 + kQ32Block) {
    int32_t sum = 0;
    const uint16_t d = fp32_to_fp16(block<V>(x, reinterpret_cast<int8_t*>(out + 2), &sum));
    __builtin_memcpy(out, &d, 2);
  }
}

}  // namespace
}  // namespace lumen::quantize_act
