// One GGUF metadata value: a scalar, a string (a view into the mapped file) or an array of
// values (arrays may nest). Accessors check the type and throw lumen::Error on a mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lumen {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
constexpr uint32_t kGgufTypeCount = 13;
const char* gguf_type_name(GgufType t);

class GgufValue {
 public:
  GgufType type = GgufType::UINT8;
  GgufType elem_type = GgufType::UINT8;  // arrays only
  uint64_t bits = 0;                      // integers and bool (sign-extended for signed types)
  double real = 0.0;                      // FLOAT32 / FLOAT64
  std::string_view str;                   // STRING
  std::vector<GgufValue> items;           // ARRAY

  bool is_integer() const;
  bool is_signed() const;
  bool is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }

  // Each throws Error("<what>: ...") when the value has another type or does not fit.
  int64_t as_int(std::string_view what) const;
  double as_float(std::string_view what) const;  // floats and integers
  bool as_bool(std::string_view what) const;
  std::string_view as_string(std::string_view what) const;
  const std::vector<GgufValue>& as_array(std::string_view what) const;

  // Short human rendering (arrays abbreviated), for `lumen inspect`.
  std::string to_string(size_t max_items = 8) const;
};

}  // namespace lumen
