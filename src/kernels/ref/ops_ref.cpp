#include "kernels/ref/ops_ref.h"

#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lumen::ref {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
  }
}

void rope_angles(int32_t pos, const RopeParams& p, float* cos_out, float* sin_out) {
  const int64_t half = p.n_rot / 2;
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  // The same float operations as ggml's rope_yarn (mscale applied only when it is not 1, so the
  // plain case is the bare cos and sin).
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  for (int64_t i = 0; i < half; i++) {
    float t = theta;
    if (p.freq_factors) t /= p.freq_factors[i];
    const float t_extrap = t;
    t *= p.freq_scale;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - p.yarn_low) / std::max(0.001f, p.yarn_high - p.yarn_low);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      t = t * (1.0f - ramp_mix) + t_extrap * ramp_mix;
    }
    cos_out[i] = std::cos(t);
    sin_out[i] = std::sin(t);
    if (mscale != 1.0f) {
      cos_out[i] *= mscale;
      sin_out[i] *= mscale;
    }
    theta *= theta_scale;
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const RopeParams& p) {
  // Angles for this position, dimension pair by pair (shared by all heads).
  std::vector<float> angles(static_cast<size_t>(p.n_rot));
  ref::rope_angles(pos, p, angles.data(), angles.data() + p.n_rot / 2);
  rope_rotate(x, n_heads, head_dim, p, angles.data(), angles.data() + p.n_rot / 2);
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p, const float* cos_buf,
                 const float* sin_buf) {
  const int64_t half = p.n_rot / 2;
  for (int64_t h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; i++) {
      const float c = cos_buf[i], s = sin_buf[i];
      const int64_t i0 = p.neox ? i : 2 * i;
      const int64_t i1 = p.neox ? i + half : 2 * i + 1;
      const float a = v[i0], b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
    }
  }
}

void softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const float e = std::exp(x[i] - max);
    x[i] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float g = gate[i];
    float y;
    if (g <= -10.0f) {
      y = 0.0f;
    } else if (g >= 10.0f) {
      y = g;
    } else {
      const float h = fp16_to_fp32(fp32_to_fp16(g));
      y = fp16_to_fp32(fp32_to_fp16(0.5f * h * (1.0f + std::tanh(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h)))));
    }
    out[i] = y * up[i];
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void soft_cap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; i++) x[i] = cap * std::tanh(x[i] * inv);
}

void vec_add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

void to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = fp32_to_fp16(x[i]);
}

void to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = fp32_to_bf16(x[i]);
}

}  // namespace lumen::ref
