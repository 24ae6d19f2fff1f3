// Helpers the JSON-schema converter's parts share: paths, local $refs, formats, bounds.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "grammar/json_schema_internal.h"

namespace lumen::json_schema {

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title",    "description", "$schema",   "$id",       "$comment", "default",
      "examples", "deprecated",  "readOnly",  "writeOnly", "strict",   "$defs", "definitions"};
  return kAnnotations.count(k) != 0;
}

bool is_trivial(const Json& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items())
    if (!is_annotation(k)) return false;
  return true;
}

namespace {

bool is_identifier(const std::string& k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (const char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$'))
      return false;
  return true;
}

std::string escape_token(const std::string& t) {
  std::string out;
  for (const char c : t) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

}  // namespace

std::string path_key(const std::string& path, const std::string& key) {
  if (is_identifier(key)) return path + "." + key;
  return path + "[" + Json(key).dump(-1, ' ', false, Json::error_handler_t::replace) + "]";
}

std::string path_index(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The pointer's tokens; false when it is malformed.
bool split_pointer(const std::string& pointer, std::vector<std::string>* tokens) {
  tokens->clear();
  if (pointer.empty()) return true;
  if (pointer[0] != '/') return false;
  std::string cur;
  for (size_t i = 1; i <= pointer.size(); i++) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens->push_back(cur);
      cur.clear();
    } else if (pointer[i] == '~') {
      if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) return false;
      cur += pointer[++i] == '0' ? '~' : '/';
    } else {
      cur += pointer[i];
    }
  }
  return true;
}

// The child of `node` a pointer token names, or nullptr.
const Json* step(const Json& node, const std::string& token) {
  if (node.is_object()) {
    const auto it = node.find(token);
    return it == node.end() ? nullptr : &*it;
  }
  if (node.is_array()) {
    if (token.empty() || token.size() > 9 || token.find_first_not_of("0123456789") != std::string::npos) return nullptr;
    if (token.size() > 1 && token[0] == '0') return nullptr;
    const size_t i = std::stoul(token);
    return i < node.size() ? &node[i] : nullptr;
  }
  return nullptr;
}

}  // namespace

const Json* resolve_ref(const Json& root, const std::string& ref, const std::string& path, std::string* pointer) {
  if (ref.empty() || ref[0] != '#')
    throw JsonSchemaError(path, fmt::format("$ref '{}' is not supported: only local refs (starting with #) are", ref));
  std::string fragment;
  for (size_t i = 1; i < ref.size(); i++) {
    if (ref[i] == '%' && i + 2 < ref.size() && hex_value(ref[i + 1]) >= 0 && hex_value(ref[i + 2]) >= 0) {
      fragment += static_cast<char>(hex_value(ref[i + 1]) * 16 + hex_value(ref[i + 2]));
      i += 2;
    } else {
      fragment += ref[i];
    }
  }
  if (!fragment.empty() && fragment[0] != '/')
    throw JsonSchemaError(path, fmt::format("$ref '{}' is not supported: anchors are not, JSON pointers are", ref));
  std::vector<std::string> tokens;
  if (!split_pointer(fragment, &tokens)) return nullptr;
  const Json* node = &root;
  std::string canonical;
  for (const std::string& t : tokens) {
    node = step(*node, t);
    if (!node) return nullptr;
    canonical += '/';
    canonical += escape_token(t);
  }
  *pointer = canonical;
  return node;
}

std::string pointer_path(const Json& root, const std::string& pointer) {
  std::vector<std::string> tokens;
  std::string path = "$";
  if (!split_pointer(pointer, &tokens)) return path;
  const Json* node = &root;
  for (const std::string& t : tokens) {
    if (!node) break;
    path = node->is_array() ? fmt::format("{}[{}]", path, t) : path_key(path, t);
    node = step(*node, t);
  }
  return path;
}

const char* format_pattern(const std::string& format) {
  // RFC 3339 full-date, leap years exact: Feb 29 in years divisible by 4, not by 100 unless
  // by 400.
#define LUMEN_DATE                                                                             \
  "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)" \
  "|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
  // RFC 3339 full-time: an offset is required; no leap second.
#define LUMEN_TIME "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#define LUMEN_LABEL "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
#define LUMEN_ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
  if (format == "date") return "^" LUMEN_DATE "$";
  if (format == "time") return "^" LUMEN_TIME "$";
  if (format == "date-time") return "^" LUMEN_DATE "[Tt]" LUMEN_TIME "$";
  if (format == "uuid") return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
  if (format == "email") return "^" LUMEN_ATEXT "+(?:\\." LUMEN_ATEXT "+)*@" LUMEN_LABEL "(?:\\." LUMEN_LABEL ")+$";
#undef LUMEN_DATE
#undef LUMEN_TIME
#undef LUMEN_LABEL
#undef LUMEN_ATEXT
  return nullptr;
}

NumberBounds number_bounds(const Json& s) {
  NumberBounds b;
  const auto decimal = [](const Json& v) { return Decimal::parse(v.dump()); };
  // Draft 2020 (exclusive* are numbers) and draft 4 (booleans that modify minimum/maximum).
  const auto side = [&](const char* incl_key, const char* excl_key, bool lower, std::optional<Decimal>& bound,
                        bool& exclusive) {
    if (s.contains(incl_key) && s[incl_key].is_number()) bound = decimal(s[incl_key]);
    if (!s.contains(excl_key)) return;
    const Json& e = s[excl_key];
    if (e.is_boolean()) {
      if (e.get<bool>() && bound) exclusive = true;
    } else if (e.is_number()) {
      const Decimal d = decimal(e);
      const int c = bound ? compare(d, *bound) : 0;
      if (!bound || (lower ? c >= 0 : c <= 0)) {
        bound = d;
        exclusive = true;
      }
    }
  };
  side("minimum", "exclusiveMinimum", true, b.lo, b.lo_exclusive);
  side("maximum", "exclusiveMaximum", false, b.hi, b.hi_exclusive);
  return b;
}

int64_t count_of(const Json& v) {
  if (v.is_number_unsigned()) return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
  if (v.is_number_integer()) return v.get<int64_t>();
  const double d = v.get<double>();
  return d >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(d);
}

}  // namespace lumen::json_schema
