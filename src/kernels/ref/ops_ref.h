// Scalar reference versions of the element-wise and per-row ops (kernels/ops.h documents
// them). They are the oracle the per-ISA versions are tested against and what LUMEN_ISA=scalar
// runs. Numerics follow ggml where it matters for reproducing llama.cpp's logits (RMSNorm's
// sum of squares in double, RoPE angles built by repeated multiplication in float).
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace lumen::ref {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const RopeParams& p);
// rope() by angles rope_angles() gave (the scalar table's rope).
void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p, const float* cos_in,
                 const float* sin_in);
void softmax(float* x, int64_t n);
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void geglu(const float* gate, const float* up, float* out, int64_t n);
void soft_cap(float* x, int64_t n, float cap);
void vec_add(const float* a, const float* b, float* out, int64_t n);
int64_t argmax(const float* x, int64_t n);
void to_f16(const float* x, uint16_t* y, int64_t n);
void to_bf16(const float* x, uint16_t* y, int64_t n);

// RoPE's angles for one position, shared by every head: cos/sin of dimension pair i for
// i < n_rot / 2, computed exactly as the reference rope() does (the per-ISA versions call it so
// their rotations are bit-identical). cos_out/sin_out hold n_rot / 2 floats.
void rope_angles(int32_t pos, const RopeParams& p, float* cos_out, float* sin_out);

}  // namespace lumen::ref
