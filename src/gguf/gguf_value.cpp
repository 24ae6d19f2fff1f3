#include "gguf/gguf_value.h"

#include <fmt/format.h>

#include <limits>

#include "core/error.h"

namespace lumen {

const char* gguf_type_name(GgufType t) {
  static const char* const kNames[] = {"uint8", "int8",   "uint16", "int16", "uint32",
                                       "int32", "float32", "bool",  "string", "array",
                                       "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kNames[i] : "invalid";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_signed() const {
  return type == GgufType::INT8 || type == GgufType::INT16 || type == GgufType::INT32 ||
         type == GgufType::INT64;
}

int64_t GgufValue::as_int(std::string_view what) const {
  if (!is_integer()) fail("{}: expected an integer, found {}", what, gguf_type_name(type));
  if (!is_signed() && bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("{}: value {} is too large", what, bits);
  return static_cast<int64_t>(bits);
}

double GgufValue::as_float(std::string_view what) const {
  if (is_float()) return real;
  if (is_integer()) return is_signed() ? static_cast<double>(static_cast<int64_t>(bits))
                                       : static_cast<double>(bits);
  fail("{}: expected a number, found {}", what, gguf_type_name(type));
}

bool GgufValue::as_bool(std::string_view what) const {
  if (type != GgufType::BOOL) fail("{}: expected a bool, found {}", what, gguf_type_name(type));
  return bits != 0;
}

std::string_view GgufValue::as_string(std::string_view what) const {
  if (type != GgufType::STRING) fail("{}: expected a string, found {}", what, gguf_type_name(type));
  return str;
}

const std::vector<GgufValue>& GgufValue::as_array(std::string_view what) const {
  if (type != GgufType::ARRAY) fail("{}: expected an array, found {}", what, gguf_type_name(type));
  return items;
}

std::string GgufValue::to_string(size_t max_items) const {
  switch (type) {
    case GgufType::STRING: {
      std::string s(str.substr(0, 120));
      for (char& c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      return fmt::format("\"{}{}\"", s, str.size() > 120 ? "..." : "");
    }
    case GgufType::BOOL:
      return bits ? "true" : "false";
    case GgufType::FLOAT32: case GgufType::FLOAT64:
      return fmt::format("{}", real);
    case GgufType::ARRAY: {
      std::string s = fmt::format("[{} x {}]", items.size(), gguf_type_name(elem_type));
      if (elem_type != GgufType::ARRAY) {
        s += " [";
        for (size_t i = 0; i < items.size() && i < max_items; i++)
          s += (i ? ", " : "") + items[i].to_string(0);
        if (items.size() > max_items) s += ", ...";
        s += "]";
      }
      return s;
    }
    default:
      return is_signed() ? fmt::format("{}", static_cast<int64_t>(bits)) : fmt::format("{}", bits);
  }
}

}  // namespace lumen
