// Element-wise and per-row operations of the transformer layer. Each call runs the version for
// active_isa() (kernels/ops_isa.h holds the per-ISA tables; kernels/ref/ops_ref.h the scalar
// references they are tested against). Numerics follow ggml where it matters for reproducing
// llama.cpp's logits (e.g. RMSNorm's sum of squares in double, RoPE angles built by repeated
// multiplication in float); SIMD versions differ from the references only by float rounding
// (their exp() is a polynomial within a few ulp of libm's; RoPE rotations are bit-identical).
#pragma once

#include <cstdint>

namespace lumen {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scale)
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

struct RopeParams {
  int64_t n_rot = 0;           // rotated dims per head (even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool neox = false;           // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
  const float* freq_factors = nullptr;  // optional, n_rot/2 divisors of theta (Llama 3 scaling)
  // YaRN (ggml's rope_yarn): with ext_factor != 0, pair i's angle mixes the interpolated
  // freq_scale * theta and the unscaled theta by ramp(i) * ext_factor, where ramp is 1 below
  // pair yarn_low, 0 above yarn_high and linear between; cos and sin are then multiplied by
  // attn_factor * (1 + 0.1 ln(1 / freq_scale)). ext_factor 0: plain (linear) scaling, cos and sin
  // times attn_factor.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float yarn_low = 0.0f, yarn_high = 0.0f;  // ggml's corr_dims, yarn_corr_dims() below
};
// ggml_rope_yarn_corr_dims: the pairs where YaRN's ramp starts and ends, for rotations that
// complete beta_fast and beta_slow turns over the original context (n_rot dims, base).
void yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                    float* low, float* high);
// RoPE's angles at position pos: cos and sin of dimension pair i < n_rot / 2 (n_rot / 2 floats
// each). They depend on the position alone, so a forward pass computes them once per token and
// every layer (Q and K) rotates by them.
void rope_angles(int32_t pos, const RopeParams& p, float* cos, float* sin);
// Rotates n_heads heads of head_dim floats each (contiguous) by one position's angles.
void rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p, const float* cos, const float* sin);

// In place: x = softmax(x) over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu(gate[i]) * up[i], GELU's tanh approximation as ggml's CPU computes it (Gemma's
// GeGLU): 0 for gate <= -10, gate for gate >= 10, otherwise the F16 rounding of
// 0.5 h (1 + tanh(sqrt(2/pi) h (1 + 0.044715 h^2))) for h = gate rounded to F16 (ggml reads a
// table of those F16 values indexed by the F16 input).
void geglu(const float* gate, const float* up, float* out, int64_t n);

// In place: x[i] = cap * tanh(x[i] * (1 / cap)), as ggml scales, tanhs and scales back
// (Gemma 2's final logit soft-capping). SIMD tanh within ~1e-7 of tanhf; a NaN stays NaN.
void soft_cap(float* x, int64_t n, float cap);

// out[i] = a[i] + b[i] (out may be a or b): residual connections, biases.
void vec_add(const float* a, const float* b, float* out, int64_t n);

// The index of the largest of x[0, n) (n >= 1), the lowest on a tie, exactly as an upward scan
// with a strict '>' from x[0]: a NaN is never taken, except x[0], which then wins (greedy
// sampling; the sampler rejects NaN logits before it asks).
int64_t argmax(const float* x, int64_t n);

// y[i] = x[i] rounded to F16 / BF16, ties to even, bit for bit core/dtype.h's fp32_to_fp16 /
// fp32_to_bf16 (NaN included): the F16 and BF16 KV caches' stores.
void to_f16(const float* x, uint16_t* y, int64_t n);
void to_bf16(const float* x, uint16_t* y, int64_t n);
// n values (a multiple of 32) as ggml's Q8_0 blocks, bit for bit from_float_q8_0 (core/quant):
// the Q8_0 KV cache's store.
void to_q8_0(const float* x, void* y, int64_t n);

}  // namespace lumen
