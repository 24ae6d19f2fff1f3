// Reference quantizers for the K-quants Q2_K..Q6_K (weights). They perform the same search as
// ggml's reference quantizers (quantize_row_q*_K_ref, which llama-quantize uses when it has no
// importance matrix), with the same float operations in the same order, so lumen writes the
// same bytes as llama-quantize:
//   - Q2_K, Q4_K, Q5_K: per sub-block an affine grid (scale, min) found by a few passes of
//     weighted least squares over slightly stretched grids (fit_affine_grid below);
//   - Q3_K, Q6_K: per sub-block a symmetric grid, refined by least squares
//     (fit_symmetric_grid, refine_q3_grid);
//   - then the sub-block scales (and mins) are themselves quantized to 4-8 bits against one
//     F16 super-block scale, and every element is re-quantized against its final scale.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"

namespace lumen {

using namespace quant;

namespace {

// Below this a group counts as all-zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (ggml's nearest_int adds 1.5*2^23 for the same effect); the
// clamp keeps absurd inputs from overflowing the int conversion.
inline int nearest_int(float f) {
  float r = std::nearbyint(f);
  if (!(r >= -4194303.0f)) r = -4194303.0f;  // also catches NaN
  if (r > 4194303.0f) r = 4194303.0f;
  return static_cast<int>(r);
}

// Affine grid x ~ scale * L + min, L in 0..nmax, min <= 0, minimising sum w*err (err squared,
// or absolute when use_abs). Starts from the plain min..max grid, then tries grids stretched by
// (rmin + rdelta*k) levels for k = 0..n_steps and, for each, the least-squares scale and min
// of its assignment. Returns the scale; *neg_min receives -min (>= 0).
float fit_affine_grid(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                      float rmin, float rdelta, int n_steps, bool use_abs) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; i++) {
    const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    float diff = scale * static_cast<float>(l) + min - x[i];
    diff = use_abs ? std::fabs(diff) : diff * diff;
    best_error += w[i] * diff;
  }
  uint8_t trial[32];
  for (int step = 0; step <= n_steps; step++) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {  // the grid must include 0: refit the scale alone
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; i++) {
      float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
      diff = use_abs ? std::fabs(diff) : diff * diff;
      error += w[i] * diff;
    }
    if (error < best_error) {
      std::copy(trial, trial + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric grid x ~ scale * (L - nmax), L - nmax in -nmax..nmax-1, weighted by x^2: the
// largest-magnitude element anchors the grid at -nmax, then 18 slightly different anchors
// (nmax +- 0.1k) are tried and the one with the best least-squares fit kept. Returns the scale
// (0 for an all-zero group).
float fit_symmetric_grid(int n, int nmax, const float* x, int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; i++) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = static_cast<float>(-nmax) / max;
  float sum_lx = 0, sum_l2 = 0;
  for (int i = 0; i < n; i++) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int k = -9; k <= 9; k++) {
    if (k == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < n; i++) {
      const float l = static_cast<float>(level(iscale, i));
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    // sum_lx^2 / sum_l2 is the error reduction of the least-squares scale: keep the largest.
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < n; i++) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Q3_K sub-block grid (levels -4..3): anchor the largest element at -4, then up to 5 rounds of
// coordinate descent, moving one element at a time to the level that best fits the
// least-squares scale of the others (weights x^2). L receives level + 4; returns the scale.
float refine_q3_grid(int n, const float* x, int8_t* L) {
  constexpr int nmax = 4;
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; i++) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sum_lx = 0, sum_l2 = 0;
  for (int i = 0; i < n; i++) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int round = 0; round < 5; round++) {
    int n_changed = 0;
    for (int i = 0; i < n; i++) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sum_lx - w * x[i] * li;
      if (!(slx > 0)) continue;
      float sl2 = sum_l2 - w * li * li;
      const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      slx += w * x[i] * static_cast<float>(new_l);
      sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (sl2 > 0 && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sum_lx = slx;
        sum_l2 = sl2;
        n_changed++;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; i++) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

// Packs 2-bit levels L[0..255] the way Q2_K and Q3_K store them (see quant_ref_kquants.cpp).
void pack_2bit(const uint8_t* L, uint8_t qs[kQK_K / 4]) {
  for (int h = 0; h < 2; h++)
    for (int l = 0; l < 32; l++) {
      const uint8_t* p = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
    }
}

// Stores the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (inverse of k4_scale_min).
void set_k4_scale_min(uint8_t s[kKScaleSize], int j, int scale, int min) {
  if (j < 4) {
    s[j] = static_cast<uint8_t>(scale);
    s[j + 4] = static_cast<uint8_t>(min);
  } else {
    s[j + 4] = static_cast<uint8_t>((scale & 0x0f) | ((min & 0x0f) << 4));
    s[j - 4] |= static_cast<uint8_t>((scale >> 4) << 6);
    s[j] |= static_cast<uint8_t>((min >> 4) << 6);
  }
}

void get_k4_scale_min(const uint8_t s[kKScaleSize], int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with affine grids of nmax+1 levels; their scales
// and mins quantized to 6 bits. Fills the block's d, dmin, scales and the levels L[256].
void quantize_k4_common(const float* x, int nmax, float rmin, int n_steps, uint16_t& d_out,
                        uint16_t& dmin_out, uint8_t scales_out[kKScaleSize], uint8_t L[kQK_K]) {
  float scales[8];
  float mins[8];
  float weights[32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; j++) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    // Weight errors by magnitude, offset by the sub-block's RMS so small values still count.
    for (int l = 0; l < 32; l++) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_affine_grid(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, 0.1f, n_steps, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(scales_out, 0, kKScaleSize);
  for (int j = 0; j < 8; j++) {
    // ggml stores nearest_int into a uint8_t before the clamp; the values are 0..63+ anyway.
    const int ls = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_scale * scales[j]))));
    const int lm = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_min * mins[j]))));
    set_k4_scale_min(scales_out, j, ls, lm);
  }
  d_out = fp32_to_fp16(max_scale / 63.0f);
  dmin_out = fp32_to_fp16(max_min / 63.0f);
  // Re-quantize every element against the final (rounded) scale and min of its sub-block.
  for (int j = 0; j < 8; j++) {
    int sc, m;
    get_k4_scale_min(scales_out, j, sc, m);
    const float d = fp16_to_fp32(d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(dmin_out) * static_cast<float>(m);
    for (int l = 0; l < 32; l++)
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
  }
}

}  // namespace

void from_float_q2_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ2_K*>(dst);
  constexpr float kQ4Scale = 15.0f;
  for (int64_t i = 0; i < n / kQK_K; i++, src += kQK_K) {
    uint8_t L[kQK_K];
    float scales[16];
    float mins[16];
    float weights[16];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < 16; j++) {
      for (int l = 0; l < 16; l++) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = fit_affine_grid(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ2_K& y = b[i];
    std::memset(y.scales, 0, sizeof(y.scales));
    y.d = fp32_to_fp16(0.0f);
    y.dmin = fp32_to_fp16(0.0f);
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; j++) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y.d = fp32_to_fp16(max_scale / kQ4Scale);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; j++) y.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y.dmin = fp32_to_fp16(max_min / kQ4Scale);
    }
    for (int j = 0; j < 16; j++) {
      const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j] & 0x0f);
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(y.scales[j] >> 4);
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((src[16 * j + l] + dm) / d), 0, 3));
    }
    pack_2bit(L, y.qs);
  }
}

void from_float_q3_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; i++, src += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < 16; j++) {
      scales[j] = refine_q3_grid(16, src + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ3_K& y = b[i];
    std::memset(y.scales, 0, sizeof(y.scales));
    y.d = fp32_to_fp16(0.0f);
    if (max_scale != 0.0f) {
      // 6-bit signed scales (offset 32): low nibbles in bytes 0..7, high bit pairs in 8..11.
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; j++) {
        const int l = std::clamp(static_cast<int>(static_cast<int8_t>(nearest_int(iscale * scales[j]))), -32, 31) + 32;
        if (j < 8)
          y.scales[j] = static_cast<uint8_t>(l & 0x0f);
        else
          y.scales[j - 8] |= static_cast<uint8_t>((l & 0x0f) << 4);
        y.scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y.d = fp32_to_fp16(1 / iscale);
    }
    for (int j = 0; j < 16; j++) {
      const int low = j < 8 ? (y.scales[j] & 0x0f) : (y.scales[j - 8] >> 4);
      const int sc = (low | (((y.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(src[16 * j + l] / d), -4, 3) + 4);
    }
    // High bit of element e goes to bit e/32 of hmask[e%32]; the low 2 bits to qs.
    std::memset(y.hmask, 0, sizeof(y.hmask));
    uint8_t low[kQK_K];
    for (int e = 0; e < kQK_K; e++) {
      int l = L[e];
      if (l > 3) {
        y.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
        l -= 4;
      }
      low[e] = static_cast<uint8_t>(l);
    }
    pack_2bit(low, y.qs);
  }
}

void from_float_q4_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; i++, src += kQK_K) {
    uint8_t L[kQK_K];
    quantize_k4_common(src, 15, -1.0f, 20, b[i].d, b[i].dmin, b[i].scales, L);
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++)
        b[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void from_float_q5_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; i++, src += kQK_K) {
    uint8_t L[kQK_K];
    quantize_k4_common(src, 31, -0.5f, 15, b[i].d, b[i].dmin, b[i].scales, L);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++) {
        const int lo = L[64 * c + l];
        const int hi = L[64 * c + 32 + l];
        b[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        b[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      }
  }
}

void from_float_q6_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; i++, src += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int j = 0; j < 16; j++) {
      scales[j] = fit_symmetric_grid(16, 32, src + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ6_K& y = b[i];
    std::memset(&y, 0, sizeof(y));
    if (max_abs_scale < kGroupMaxEps) continue;  // all zero
    const float iscale = -128.0f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; j++) y.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < 16; j++) {
      const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; l++)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(src[16 * j + l] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; h++)
      for (int l = 0; l < 32; l++) {
        const int8_t* p = L + 128 * h + l;
        y.ql[64 * h + l] = static_cast<uint8_t>((p[0] & 0x0f) | ((p[64] & 0x0f) << 4));
        y.ql[64 * h + 32 + l] = static_cast<uint8_t>((p[32] & 0x0f) | ((p[96] & 0x0f) << 4));
        y.qh[32 * h + l] =
            static_cast<uint8_t>((p[0] >> 4) | ((p[32] >> 4) << 2) | ((p[64] >> 4) << 4) | ((p[96] >> 4) << 6));
      }
  }
}

}  // namespace lumen
