// Tensor element types as GGUF numbers them (ggml type ids), and one traits table per type:
// block size, bytes per block, and the scalar reference conversions. Kernels (src/kernels)
// build on these; the scalar functions here are the oracle they are tested against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lumen {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// Scalar reference conversions of whole rows: n is a multiple of block_size.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);
// Dot product of one weight row (this type) with one activation row already converted to the
// type's vec_dot_type (e.g. Q8_0 for Q4_0, Q8_K for the K-quants, F16 for F16), n elements.
// This is how ggml computes quantized matmuls, and matching it is what lets lumen reproduce
// llama.cpp's logits on quantized models.
using VecDotFn = float (*)(int64_t n, const void* w_row, const void* a_row);

struct TypeTraits {
  GgmlType type;
  const char* name;
  int64_t block_size;        // elements per block
  size_t type_size;          // bytes per block
  ToFloatFn to_float;        // nullptr: lumen cannot compute with this type (yet)
  FromFloatFn from_float;    // nullptr: lumen cannot quantize to this type
  GgmlType vec_dot_type;     // the activation format vec_dot pairs with
  VecDotFn vec_dot;          // nullptr: no matmul support
};

// Traits of a type id read from a file; nullptr for an id that is not a known ggml type.
const TypeTraits* find_type_traits(uint32_t type_id);
const TypeTraits& type_traits(GgmlType type);  // for known types
std::optional<GgmlType> type_from_name(std::string_view name);  // "q8_0", "Q4_K", ... (any case)

inline std::string_view type_name(GgmlType t) { return type_traits(t).name; }
// Bytes of a row of n elements (n a multiple of the block size).
inline size_t row_size(GgmlType t, int64_t n) {
  const TypeTraits& tr = type_traits(t);
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

// Half-precision conversions (IEEE binary16 and bfloat16), exact and portable.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN kept quiet

}  // namespace lumen
