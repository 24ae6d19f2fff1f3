// Scalar reference dequantizers and dot products for the K-quants (Q2_K..Q6_K, 256-element
// super-blocks) and their activation format Q8_K.
//
// Each weight format is first unpacked into one common shape, KBlock: 256 small integers q, an
// integer scale (and minimum) per group of 16 elements, and the block's float d (and dmin), so
// that element e is  x = (d * scale[e/16]) * q[e] - (dmin * min[e/16]).
// That is the value and the float evaluation order of ggml's dequantize_row_*; Q3_K and Q6_K
// have no minimum. The bit packing of each format lives only in its unpack function.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"

namespace lumen {

using namespace quant;

namespace {

constexpr int kGroups = kQK_K / 16;

struct KBlock {
  float d = 0.0f;
  float dmin = 0.0f;
  bool has_min = false;
  int8_t q[kQK_K];
  int scale[kGroups];
  int min[kGroups];
};

// Q2_K: element e = 128*h + 32*j + l (h half, j 2-bit plane, l 0..31) is bits 2j..2j+1 of
// qs[32*h + l]; scales[g] = scale (low nibble) | min (high nibble) of group g = e/16.
void unpack(const BlockQ2_K& b, KBlock& k) {
  k.d = fp16_to_fp32(b.d);
  k.dmin = fp16_to_fp32(b.dmin);
  k.has_min = true;
  for (int e = 0; e < kQK_K; e++) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32;
    k.q[e] = static_cast<int8_t>((b.qs[32 * h + l] >> (2 * j)) & 3);
  }
  for (int g = 0; g < kGroups; g++) {
    k.scale[g] = b.scales[g] & 0x0f;
    k.min[g] = b.scales[g] >> 4;
  }
}

// Q3_K 6-bit scale of group g: low 4 bits in a nibble of scales[0..7], high 2 bits in a bit
// pair of scales[8..11]; stored with an offset of 32.
int q3_k_scale(const uint8_t s[12], int g) {
  const int low = g < 8 ? (s[g] & 0x0f) : (s[g - 8] >> 4);
  const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Q3_K: the low 2 bits as in Q2_K; the high bit of element e = 128*h + 32*j + l is bit 4h+j of
// hmask[l], and a clear bit means "subtract 4" (q in -4..3).
void unpack(const BlockQ3_K& b, KBlock& k) {
  k.d = fp16_to_fp32(b.d);
  k.has_min = false;
  for (int e = 0; e < kQK_K; e++) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32;
    const int low = (b.qs[32 * h + l] >> (2 * j)) & 3;
    const bool high = (b.hmask[l] >> (4 * h + j)) & 1;
    k.q[e] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
  for (int g = 0; g < kGroups; g++) {
    k.scale[g] = q3_k_scale(b.scales, g);
    k.min[g] = 0;
  }
}

// Q4_K/Q5_K 6-bit scale and min of sub-block s (0..7) from the 12 packed bytes: sub-blocks 0..3
// use the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 take their low 4
// bits from the nibbles of bytes 8..11 and their high 2 bits from the top bits of bytes 0..7.
void k4_scale_min(const uint8_t s[kKScaleSize], int sub, int& scale, int& min) {
  if (sub < 4) {
    scale = s[sub] & 63;
    min = s[sub + 4] & 63;
  } else {
    scale = (s[sub + 4] & 0x0f) | ((s[sub - 4] >> 6) << 4);
    min = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
  }
}

void set_k4_scales(const uint8_t s[kKScaleSize], KBlock& k) {
  for (int g = 0; g < kGroups; g++) k4_scale_min(s, g / 2, k.scale[g], k.min[g]);
}

// Q4_K: element e = 64*c + 32*p + l (c chunk, p nibble) is nibble p of qs[32*c + l];
// sub-block e/32 (two groups of 16 share a scale and min).
void unpack(const BlockQ4_K& b, KBlock& k) {
  k.d = fp16_to_fp32(b.d);
  k.dmin = fp16_to_fp32(b.dmin);
  k.has_min = true;
  for (int e = 0; e < kQK_K; e++) {
    const int c = e / 64, p = (e % 64) / 32, l = e % 32;
    k.q[e] = static_cast<int8_t>((b.qs[32 * c + l] >> (4 * p)) & 0x0f);
  }
  set_k4_scales(b.scales, k);
}

// Q5_K: Q4_K plus bit 4 of element e = 64*c + 32*p + l in bit 2c+p of qh[l].
void unpack(const BlockQ5_K& b, KBlock& k) {
  k.d = fp16_to_fp32(b.d);
  k.dmin = fp16_to_fp32(b.dmin);
  k.has_min = true;
  for (int e = 0; e < kQK_K; e++) {
    const int c = e / 64, p = (e % 64) / 32, l = e % 32;
    const int low = (b.qs[32 * c + l] >> (4 * p)) & 0x0f;
    const int high = (b.qh[l] >> (2 * c + p)) & 1;
    k.q[e] = static_cast<int8_t>(low | (high << 4));
  }
  set_k4_scales(b.scales, k);
}

// Q6_K: element e = 128*h + 32*r + l (r 0..3): low 4 bits are nibble r/2 of ql[64*h + 32*(r%2)
// + l], high 2 bits are bits 2r..2r+1 of qh[32*h + l]; q = value - 32; one int8 scale per group.
void unpack(const BlockQ6_K& b, KBlock& k) {
  k.d = fp16_to_fp32(b.d);
  k.has_min = false;
  for (int e = 0; e < kQK_K; e++) {
    const int h = e / 128, r = (e % 128) / 32, l = e % 32;
    const int low = (b.ql[64 * h + 32 * (r % 2) + l] >> (4 * (r / 2))) & 0x0f;
    const int high = (b.qh[32 * h + l] >> (2 * r)) & 3;
    k.q[e] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
  for (int g = 0; g < kGroups; g++) {
    k.scale[g] = b.scales[g];
    k.min[g] = 0;
  }
}

void dequantize(const KBlock& k, float* y) {
  for (int g = 0; g < kGroups; g++) {
    const float dl = k.d * static_cast<float>(k.scale[g]);
    const float ml = k.has_min ? k.dmin * static_cast<float>(k.min[g]) : 0.0f;
    for (int l = 0; l < 16; l++) {
      const float v = dl * static_cast<float>(k.q[16 * g + l]);
      y[16 * g + l] = k.has_min ? v - ml : v;
    }
  }
}

template <typename Block>
void to_float_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const Block*>(src);
  KBlock k;
  for (int64_t i = 0; i < n / kQK_K; i++, dst += kQK_K) {
    unpack(b[i], k);
    dequantize(k, dst);
  }
}

// Weight super-block x Q8_K activations:
//   d_w*d_a * sum_g scale_g * (q_w . q_a)_g  -  dmin_w*d_a * sum_g min_g * bsum_g,
// with both integer sums exact, as ggml's generic vec_dot_*_q8_K computes per block.
template <typename Block>
float vec_dot_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  KBlock k;
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; i++) {
    unpack(x[i], k);
    int isum = 0;
    for (int g = 0; g < kGroups; g++) {
      int gsum = 0;
      for (int l = 0; l < 16; l++) gsum += k.q[16 * g + l] * y[i].qs[16 * g + l];
      isum += k.scale[g] * gsum;
    }
    sum += k.d * y[i].d * static_cast<float>(isum);
    if (k.has_min) {
      int msum = 0;
      for (int g = 0; g < kGroups; g++) msum += k.min[g] * y[i].bsums[g];
      sum -= k.dmin * y[i].d * static_cast<float>(msum);
    }
  }
  return sum;
}

}  // namespace

void to_float_q2_k(const void* src, float* dst, int64_t n) { to_float_k<BlockQ2_K>(src, dst, n); }
void to_float_q3_k(const void* src, float* dst, int64_t n) { to_float_k<BlockQ3_K>(src, dst, n); }
void to_float_q4_k(const void* src, float* dst, int64_t n) { to_float_k<BlockQ4_K>(src, dst, n); }
void to_float_q5_k(const void* src, float* dst, int64_t n) { to_float_k<BlockQ5_K>(src, dst, n); }
void to_float_q6_k(const void* src, float* dst, int64_t n) { to_float_k<BlockQ6_K>(src, dst, n); }

float vec_dot_q2_k(int64_t n, const void* w, const void* a) { return vec_dot_k<BlockQ2_K>(n, w, a); }
float vec_dot_q3_k(int64_t n, const void* w, const void* a) { return vec_dot_k<BlockQ3_K>(n, w, a); }
float vec_dot_q4_k(int64_t n, const void* w, const void* a) { return vec_dot_k<BlockQ4_K>(n, w, a); }
float vec_dot_q5_k(int64_t n, const void* w, const void* a) { return vec_dot_k<BlockQ5_K>(n, w, a); }
float vec_dot_q6_k(int64_t n, const void* w, const void* a) { return vec_dot_k<BlockQ6_K>(n, w, a); }

void to_float_q8_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; i++, dst += kQK_K)
    for (int j = 0; j < kQK_K; j++) dst[j] = b[i].d * static_cast<float>(b[i].qs[j]);
}

// Q8_K (ggml's quantize_row_q8_K_ref, which x86 uses as is): iscale = -127/x_m with x_m the
// first element of largest magnitude, q = min(127, round_half_even(iscale * x)), d = 1/iscale;
// bsums are the sums of each group of 16 quants. An all-zero block gets d = 0 and q = 0.
void from_float_q8_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; i++, src += kQK_K) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK_K; j++) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    std::memset(&b[i], 0, sizeof(BlockQ8_K));
    if (amax == 0.0f) continue;
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; j++) {
      const float v = std::nearbyint(iscale * src[j]);  // ggml's nearest_int: ties to even
      b[i].qs[j] = static_cast<int8_t>(std::min(127.0f, v));
    }
    for (int g = 0; g < kGroups; g++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.0f / iscale;
  }
}

}  // namespace lumen
