// Scalar reference conversions for ggml's 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0 and the activation format Q8_1. Weight quantizers reproduce ggml's reference
// quantizers (quantize_row_*_ref) operation for operation, so lumen's quantized files match
// llama-quantize's. The dequantizers are bit-exact with ggml's: the same float operations in
// the same order (this file is built without FMA contraction, as the baseline x86-64 target
// has no FMA instructions).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"

namespace lumen {

using namespace quant;

namespace {

// Bit 4 of element j of a Q5 block (j in 0..31) from its 32-bit qh field.
inline uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
         (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
}

inline void store_qh(uint8_t qh[4], uint32_t v) {
  for (int i = 0; i < 4; i++) qh[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Element of largest magnitude (the first one on ties), sign kept.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; j++) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Activation quantization to 8 bits. ggml's reference quantize_row_q8_0_ref uses
// id = 1/(amax/127) and roundf (ties away from zero), but the matmul path llama.cpp actually
// runs on x86 (quantize_row_q8_0/_q8_1 with AVX2/AVX-512) uses id = 127/amax and rounds with
// _mm256_round_ps(_MM_ROUND_NEAREST), i.e. ties to even. Exact ties are common in practice
// (see shared/reference/README.md, synth-tiny-q4_0), and lumen's goal is to reproduce
// llama.cpp's logits, so the activation formats follow the AVX code. Returns d (unrounded)
// and the integer sum of the quants.
inline float quantize_block_8bit(const float* x, int8_t* q, int* sum_q) {
  float amax = 0.0f;
  for (int j = 0; j < kQK8_0; j++) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int sum = 0;
  for (int j = 0; j < kQK8_0; j++) {
    const float v = std::nearbyint(x[j] * id);  // default rounding mode: ties to even
    q[j] = static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
    sum += q[j];
  }
  *sum_q = sum;
  return d;
}

}  // namespace

// ---- dequantization ----

void to_float_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK4_0; i++, dst += kQK4_0) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; j++) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
      dst[j + kQK4_0 / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void to_float_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK4_1; i++, dst += kQK4_1) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < kQK4_1 / 2; j++) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
      dst[j + kQK4_1 / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void to_float_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK5_0; i++, dst += kQK5_0) {
    const float d = fp16_to_fp32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK5_0 / 2; j++) {
      const int hi0 = ((qh >> j) & 1) << 4;
      const int hi1 = ((qh >> (j + 16)) & 1) << 4;
      dst[j] = static_cast<float>(((b[i].qs[j] & 0x0f) | hi0) - 16) * d;
      dst[j + kQK5_0 / 2] = static_cast<float>(((b[i].qs[j] >> 4) | hi1) - 16) * d;
    }
  }
}

void to_float_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK5_1; i++, dst += kQK5_1) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK5_1 / 2; j++) {
      const int hi0 = ((qh >> j) & 1) << 4;
      const int hi1 = ((qh >> (j + 16)) & 1) << 4;
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0f) | hi0) * d + m;
      dst[j + kQK5_1 / 2] = static_cast<float>((b[i].qs[j] >> 4) | hi1) * d + m;
    }
  }
}

void to_float_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK8_0; i++, dst += kQK8_0) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK8_0; j++) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void to_float_q8_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK8_1; i++, dst += kQK8_1) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK8_1; j++) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// ---- quantization ----

// Q4_0 (ggml reference): d = max / -8 with max the signed element of largest magnitude, so that
// element maps exactly to q = 0; q = min(15, trunc(x/d + 8.5)).
void from_float_q4_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK4_0; i++, src += kQK4_0) {
    const float max = signed_absmax(src, kQK4_0);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; j++) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(src[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(src[j + kQK4_0 / 2] * id + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Q4_1 (ggml reference): min/max affine grid with 16 levels, q = min(15, trunc((x-min)/d + 0.5)).
void from_float_q4_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK4_1; i++, src += kQK4_1) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK4_1; j++) {
      min = std::min(min, src[j]);
      max = std::max(max, src[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kQK4_1 / 2; j++) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((src[j] - min) * id + 0.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>((src[j + kQK4_1 / 2] - min) * id + 0.5f)));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Q5_0 (ggml reference): as Q4_0 with 32 levels, d = max / -16.
void from_float_q5_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK5_0; i++, src += kQK5_0) {
    const float max = signed_absmax(src, kQK5_0);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_0 / 2; j++) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(src[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(src[j + kQK5_0 / 2] * id + 16.5f)));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kQK5_0 / 2);
    }
    store_qh(b[i].qh, qh);
  }
}

// Q5_1 (ggml reference): as Q4_1 with 32 levels, q = trunc((x-min)/d + 0.5); (x-min)/d is at
// most 31 plus rounding slack, so no clamp is needed (ggml has none either).
void from_float_q5_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK5_1; i++, src += kQK5_1) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK5_1; j++) {
      min = std::min(min, src[j]);
      max = std::max(max, src[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    b[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK5_1 / 2; j++) {
      const int q0 = static_cast<uint8_t>((src[j] - min) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((src[j + kQK5_1 / 2] - min) * id + 0.5f);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kQK5_1 / 2);
    }
    store_qh(b[i].qh, qh);
  }
}

// Q8_0 as the activation format of matmuls (llama.cpp's x86 path: ties to even, see above).
void from_float_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; i++, src += kQK8_0) {
    int sum = 0;
    const float d = quantize_block_8bit(src, b[i].qs, &sum);
    b[i].d = fp32_to_fp16(d);
  }
}

// Q8_1: Q8_0 plus s = d * sum(q), with d before its rounding to F16 (as ggml's AVX code).
void from_float_q8_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK8_1; i++, src += kQK8_1) {
    int sum = 0;
    const float d = quantize_block_8bit(src, b[i].qs, &sum);
    b[i].d = fp32_to_fp16(d);
    b[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// Q8_0 as a weight format, exactly ggml's quantize_row_q8_0_ref (what llama-quantize writes):
// id = 1/d and roundf (ties away from zero).
void from_float_q8_0_weights(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; i++, src += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; j++) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; j++) b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
  }
}

FromFloatFn weight_quantizer(GgmlType t) {
  if (t == GgmlType::Q8_0) return from_float_q8_0_weights;
  if (t == GgmlType::Q8_1 || t == GgmlType::Q8_K) return nullptr;  // activation-only formats
  return type_traits(t).from_float;
}

// ---- dot products: sum over blocks of d_w * d_a * (integer dot), plus the minimum's term ----

float vec_dot_q4_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_0; i++) {
    int isum = 0;
    for (int j = 0; j < kQK4_0 / 2; j++) {
      isum += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
      isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + kQK4_0 / 2];
    }
    sum += static_cast<float>(isum) * fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d);
  }
  return sum;
}

// Q4_1 x Q8_1: sum d_w*q_w + m_w over the block times d_a*q_a = d_w*d_a*isum + m_w*s_a.
float vec_dot_q4_1(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK4_1; i++) {
    int isum = 0;
    for (int j = 0; j < kQK4_1 / 2; j++) {
      isum += (x[i].qs[j] & 0x0f) * y[i].qs[j];
      isum += (x[i].qs[j] >> 4) * y[i].qs[j + kQK4_1 / 2];
    }
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum) +
           fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sum;
}

float vec_dot_q5_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK5_0; i++) {
    const uint32_t qh = load_qh(x[i].qh);
    int isum = 0;
    for (int j = 0; j < kQK5_0 / 2; j++) {
      const int q0 = ((x[i].qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - 16;
      const int q1 = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + kQK5_0 / 2];
    }
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q5_1(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK5_1; i++) {
    const uint32_t qh = load_qh(x[i].qh);
    int isum = 0;
    for (int j = 0; j < kQK5_1 / 2; j++) {
      const int q0 = (x[i].qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
      const int q1 = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      isum += q0 * y[i].qs[j] + q1 * y[i].qs[j + kQK5_1 / 2];
    }
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * static_cast<float>(isum) +
           fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sum;
}

float vec_dot_q8_0(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK8_0; i++) {
    int isum = 0;
    for (int j = 0; j < kQK8_0; j++) isum += x[i].qs[j] * y[i].qs[j];
    sum += static_cast<float>(isum) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

}  // namespace lumen
