// Scalar reference conversions for IQ4_NL: 32-element blocks of 4-bit indices into a fixed
// non-linear table of 16 levels (block_formats.h), one F16 scale per block.
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"

namespace lumen {

using namespace quant;

void to_float_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kQK4_NL; i++, dst += kQK4_NL) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK4_NL / 2; j++) {
      dst[j] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] & 0x0f]);
      dst[j + kQK4_NL / 2] = d * static_cast<float>(kIq4nlValues[b[i].qs[j] >> 4]);
    }
  }
}

namespace {

// Index of the table level nearest to v (the upper one on an exact tie, as ggml's
// best_index_int8); values must be ascending.
int nearest_level(const int8_t* values, int n, float v) {
  if (v <= values[0]) return 0;
  if (v >= values[n - 1]) return n - 1;
  int lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - values[hi - 1] < values[hi] - v ? hi - 1 : hi;
}

}  // namespace

// IQ4_NL quantizer: ggml's reference (quantize_iq4_nl without an importance matrix), so the
// bytes match llama-quantize's. Per block, errors are weighted by x^2; the element of largest
// magnitude is first mapped onto the outermost level (-127), then 15 nearby anchors
// (-127 +- k, k <= 7) are tried and the least-squares scale of the best assignment kept;
// finally every element is re-assigned against that scale.
void from_float_iq4_nl(const float* src, void* dst, int64_t n) {
  constexpr int kTries = 7;
  const int8_t* values = kIq4nlValues;
  auto* b = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t i = 0; i < n / kQK4_NL; i++, src += kQK4_NL) {
    const float* x = src;
    float weight[kQK4_NL];
    for (int j = 0; j < kQK4_NL; j++) weight[j] = x[j] * x[j];
    float amax = 0, max = 0;
    for (int j = 0; j < kQK4_NL; j++) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    float scale = 0.0f;
    if (!(amax < 1e-15f)) {  // ggml's GROUP_MAX_EPS: smaller blocks are stored as zero
      float d = -max / static_cast<float>(values[0]);
      float id = 1 / d;
      float sum_qx = 0, sum_q2 = 0;
      for (int j = 0; j < kQK4_NL; j++) {
        const float q = values[nearest_level(values, 16, id * x[j])];
        sum_qx += weight[j] * q * x[j];
        sum_q2 += weight[j] * q * q;
      }
      d = sum_qx / sum_q2;
      float best = d * sum_qx;
      for (int t = -kTries; t <= kTries; t++) {
        id = static_cast<float>(t + values[0]) / max;
        sum_qx = sum_q2 = 0;
        for (int j = 0; j < kQK4_NL; j++) {
          const float q = values[nearest_level(values, 16, id * x[j])];
          sum_qx += weight[j] * q * x[j];
          sum_q2 += weight[j] * q * q;
        }
        if (sum_q2 > 0 && sum_qx * sum_qx > best * sum_q2) {
          d = sum_qx / sum_q2;
          best = d * sum_qx;
        }
      }
      scale = d;
    }
    b[i].d = fp32_to_fp16(scale);
    const float id = scale != 0.0f ? 1 / scale : 0.0f;
    uint8_t L[kQK4_NL];
    for (int j = 0; j < kQK4_NL; j++) L[j] = static_cast<uint8_t>(nearest_level(values, 16, id * x[j]));
    for (int j = 0; j < kQK4_NL / 2; j++) b[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + kQK4_NL / 2] << 4));
  }
}

// IQ4_NL x Q8_0: the table values are integers, so the block dot is exact in int.
float vec_dot_iq4_nl(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_NL*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_NL; i++) {
    int isum = 0;
    for (int j = 0; j < kQK4_NL / 2; j++) {
      isum += kIq4nlValues[x[i].qs[j] & 0x0f] * y[i].qs[j];
      isum += kIq4nlValues[x[i].qs[j] >> 4] * y[i].qs[j + kQK4_NL / 2];
    }
    sum += fp16_to_fp32(y[i].d) * fp16_to_fp32(x[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace lumen
