#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/quant/quant_ref.h"

namespace lumen {

namespace {

// Block sizes and bytes per block are facts of the ggml formats.
constexpr TypeTraits kTraits[] = {
    {GgmlType::F32, "F32", 1, 4, to_float_f32, from_float_f32, GgmlType::F32, vec_dot_f32},
    {GgmlType::F16, "F16", 1, 2, to_float_f16, from_float_f16, GgmlType::F16, vec_dot_f16},
    {GgmlType::Q4_0, "Q4_0", 32, 18, to_float_q4_0, from_float_q4_0, GgmlType::Q8_0, vec_dot_q4_0},
    {GgmlType::Q4_1, "Q4_1", 32, 20, to_float_q4_1, from_float_q4_1, GgmlType::Q8_1, vec_dot_q4_1},
    {GgmlType::Q5_0, "Q5_0", 32, 22, to_float_q5_0, from_float_q5_0, GgmlType::Q8_0, vec_dot_q5_0},
    {GgmlType::Q5_1, "Q5_1", 32, 24, to_float_q5_1, from_float_q5_1, GgmlType::Q8_1, vec_dot_q5_1},
    {GgmlType::Q8_0, "Q8_0", 32, 34, to_float_q8_0, from_float_q8_0, GgmlType::Q8_0, vec_dot_q8_0},
    {GgmlType::Q8_1, "Q8_1", 32, 36, to_float_q8_1, from_float_q8_1, GgmlType::Q8_1, nullptr},
    {GgmlType::Q2_K, "Q2_K", 256, 84, to_float_q2_k, from_float_q2_k, GgmlType::Q8_K, vec_dot_q2_k},
    {GgmlType::Q3_K, "Q3_K", 256, 110, to_float_q3_k, from_float_q3_k, GgmlType::Q8_K, vec_dot_q3_k},
    {GgmlType::Q4_K, "Q4_K", 256, 144, to_float_q4_k, from_float_q4_k, GgmlType::Q8_K, vec_dot_q4_k},
    {GgmlType::Q5_K, "Q5_K", 256, 176, to_float_q5_k, from_float_q5_k, GgmlType::Q8_K, vec_dot_q5_k},
    {GgmlType::Q6_K, "Q6_K", 256, 210, to_float_q6_k, from_float_q6_k, GgmlType::Q8_K, vec_dot_q6_k},
    {GgmlType::Q8_K, "Q8_K", 256, 292, to_float_q8_k, from_float_q8_k, GgmlType::Q8_K, nullptr},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, nullptr, nullptr, GgmlType::IQ2_XXS, nullptr},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, nullptr, nullptr, GgmlType::IQ2_XS, nullptr},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, nullptr, nullptr, GgmlType::IQ3_XXS, nullptr},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, nullptr, nullptr, GgmlType::IQ1_S, nullptr},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, to_float_iq4_nl, from_float_iq4_nl, GgmlType::Q8_0, vec_dot_iq4_nl},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, nullptr, nullptr, GgmlType::IQ3_S, nullptr},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, nullptr, nullptr, GgmlType::IQ2_S, nullptr},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, nullptr, nullptr, GgmlType::IQ4_XS, nullptr},
    {GgmlType::I8, "I8", 1, 1, nullptr, nullptr, GgmlType::I8, nullptr},
    {GgmlType::I16, "I16", 1, 2, nullptr, nullptr, GgmlType::I16, nullptr},
    {GgmlType::I32, "I32", 1, 4, nullptr, nullptr, GgmlType::I32, nullptr},
    {GgmlType::I64, "I64", 1, 8, nullptr, nullptr, GgmlType::I64, nullptr},
    {GgmlType::F64, "F64", 1, 8, nullptr, nullptr, GgmlType::F64, nullptr},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, nullptr, nullptr, GgmlType::IQ1_M, nullptr},
    {GgmlType::BF16, "BF16", 1, 2, to_float_bf16, from_float_bf16, GgmlType::BF16, vec_dot_bf16},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, nullptr, nullptr, GgmlType::TQ1_0, nullptr},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, nullptr, nullptr, GgmlType::TQ2_0, nullptr},
    {GgmlType::MXFP4, "MXFP4", 32, 17, nullptr, nullptr, GgmlType::MXFP4, nullptr},
};

}  // namespace

const TypeTraits* find_type_traits(uint32_t type_id) {
  for (const TypeTraits& t : kTraits)
    if (static_cast<uint32_t>(t.type) == type_id) return &t;
  return nullptr;
}

const TypeTraits& type_traits(GgmlType type) {
  const TypeTraits* t = find_type_traits(static_cast<uint32_t>(type));
  LUMEN_ASSERT(t != nullptr);
  return *t;
}

std::optional<GgmlType> type_from_name(std::string_view name) {
  std::string up(name);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const TypeTraits& t : kTraits)
    if (up == t.name) return t.type;
  return std::nullopt;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  // Infinity; a NaN quiet with its upper mantissa bits, as F16C's vcvtps2ph makes it.
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to infinity
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) - 1 ... yields shift in [14, 24]
    uint32_t r = m >> (shift);
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
  return static_cast<uint16_t>(sign | r);
}

float bf16_to_fp32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t fp32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

}  // namespace lumen
