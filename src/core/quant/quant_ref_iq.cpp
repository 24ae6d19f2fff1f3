// Scalar reference conversions for IQ4_NL: 32-element blocks of 4-bit indices into a fixed
// non-linear table of 16 levels (block_formats.h), one F16 scale per block.
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
