// Scalar reference conversions for the plain float formats: F32, F16 (IEEE binary16), BF16.
#include <cstring>

#include "core/dtype.h"
#include "core/quant/quant_ref.h"

namespace lumen {

void to_float_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void to_float_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(h[i]);
}

void to_float_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(h[i]);
}

void from_float_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// Round to nearest even, as ggml's F16C conversion does for activations of F16 matmuls.
void from_float_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
}

void from_float_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; i++) h[i] = fp32_to_bf16(src[i]);
}

// The float dot products follow ggml's generic code: each product is formed in float (exact
// for F16/BF16 inputs, whose products fit in a float's mantissa) and accumulated in double, so
// the result is the correctly rounded sum up to the final rounding to float.
float vec_dot_f32(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sum);
}

float vec_dot_f16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += static_cast<double>(fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]));
  return static_cast<float>(sum);
}

float vec_dot_bf16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += static_cast<double>(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
  return static_cast<float>(sum);
}

}  // namespace lumen
