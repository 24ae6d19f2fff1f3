// Scalar reference conversions for every weight format lumen computes with. Each function
// converts a whole row of n elements (n a multiple of the type's block size). Bit layouts follow
// the public ggml/GGUF format descriptions; the code is lumen's own. These are the oracles the
// optimised kernels are tested against, so they favour clarity over speed.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace lumen {

void to_float_f32(const void* src, float* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);
void to_float_q4_0(const void* src, float* dst, int64_t n);
void to_float_q4_1(const void* src, float* dst, int64_t n);
void to_float_q5_0(const void* src, float* dst, int64_t n);
void to_float_q5_1(const void* src, float* dst, int64_t n);
void to_float_q8_0(const void* src, float* dst, int64_t n);
void to_float_q8_1(const void* src, float* dst, int64_t n);
void to_float_q2_k(const void* src, float* dst, int64_t n);
void to_float_q3_k(const void* src, float* dst, int64_t n);
void to_float_q4_k(const void* src, float* dst, int64_t n);
void to_float_q5_k(const void* src, float* dst, int64_t n);
void to_float_q6_k(const void* src, float* dst, int64_t n);
void to_float_q8_k(const void* src, float* dst, int64_t n);
void to_float_iq4_nl(const void* src, float* dst, int64_t n);

void from_float_f32(const float* src, void* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);
void from_float_q4_0(const float* src, void* dst, int64_t n);
void from_float_q4_1(const float* src, void* dst, int64_t n);
void from_float_q5_0(const float* src, void* dst, int64_t n);
void from_float_q5_1(const float* src, void* dst, int64_t n);
// Q8_0/Q8_1/Q8_K here are the activation quantizers of llama.cpp's x86 matmul path (Q8_0/Q8_1
// round ties to even, see quant_ref_legacy.cpp); the other block types are weight quantizers
// reproducing ggml's reference quantizers (quantize_row_*_ref, what llama-quantize writes
// without an importance matrix).
void from_float_q8_0(const float* src, void* dst, int64_t n);
void from_float_q8_1(const float* src, void* dst, int64_t n);
void from_float_q8_k(const float* src, void* dst, int64_t n);
// Q8_0 as a weight format: ggml's quantize_row_q8_0_ref (roundf, ties away from zero).
void from_float_q8_0_weights(const float* src, void* dst, int64_t n);
// K-quant weight quantizers (quant_ref_kquantize.cpp) and IQ4_NL's.
void from_float_q2_k(const float* src, void* dst, int64_t n);
void from_float_q3_k(const float* src, void* dst, int64_t n);
void from_float_q4_k(const float* src, void* dst, int64_t n);
void from_float_q5_k(const float* src, void* dst, int64_t n);
void from_float_q6_k(const float* src, void* dst, int64_t n);
void from_float_iq4_nl(const float* src, void* dst, int64_t n);  // quant_ref_iq.cpp

// The quantizer to use when writing weights of type t (e.g. `lumen quantize`): the traits'
// from_float, except Q8_0, whose from_float is the activation quantizer. Reproduces
// llama-quantize's output (no importance matrix) byte for byte. nullptr if none.
FromFloatFn weight_quantizer(GgmlType t);

// Reference dot products: weight row (named type) x activation row (its vec_dot_type).
float vec_dot_f32(int64_t n, const void* w, const void* a);
float vec_dot_f16(int64_t n, const void* w, const void* a);
float vec_dot_bf16(int64_t n, const void* w, const void* a);
float vec_dot_q4_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_1(int64_t n, const void* w, const void* a);
float vec_dot_q5_0(int64_t n, const void* w, const void* a);
float vec_dot_q5_1(int64_t n, const void* w, const void* a);
float vec_dot_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q2_k(int64_t n, const void* w, const void* a);
float vec_dot_q3_k(int64_t n, const void* w, const void* a);
float vec_dot_q4_k(int64_t n, const void* w, const void* a);
float vec_dot_q5_k(int64_t n, const void* w, const void* a);
float vec_dot_q6_k(int64_t n, const void* w, const void* a);
float vec_dot_iq4_nl(int64_t n, const void* w, const void* a);

}  // namespace lumen
