// The first pass over a schema: every keyword of every reachable schema is one the converter
// knows, with a well-formed value, before any grammar is written. Errors name the exact path;
// the generator can then trust the shapes it reads.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "grammar/json_schema_internal.h"
#include "grammar/regex_grammar.h"

namespace lumen::json_schema {

namespace {

const std::set<std::string> kUnsupported = {
    "not",           "if",           "then",          "else",           "dependentSchemas", "dependentRequired",
    "dependencies",  "patternProperties", "propertyNames", "minProperties", "maxProperties",
    "unevaluatedProperties", "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
    "multipleOf",    "contentEncoding", "contentMediaType", "contentSchema", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "$anchor",  "$vocabulary",   "discriminator",    "nullable"};

const std::set<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};

constexpr int64_t kMaxCount = 10000;

const char* kind_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::null: return "null";
    default: return "a number";
  }
}

// Whether a JSON value nests deeper than `limit` (checked before recursing, so a deep value
// costs no more stack than the limit).
bool deeper_than(const Json& v, int limit) {
  if (!v.is_structured()) return false;
  if (limit <= 0) return true;
  for (const auto& child : v) if (deeper_than(child, limit - 1)) return true;
  return false;
}

class Checker {
 public:
  Checker(const Json& root, const JsonSchemaLimits& limits) : root_(root), limits_(limits) {}

  void run() {
    visit(root_, "$", "", 0);
    // $ref targets outside the places visited (a pointer into the middle of a schema) are
    // checked as schemas of their own.
    while (!refs_.empty()) {
      const auto [ref_path, pointer, target] = refs_.back();
      refs_.pop_back();
      if (visited_.count(pointer)) continue;
      visit(*target, pointer_path(root_, pointer), pointer, 0);
    }
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& msg) { throw JsonSchemaError(path, msg); }

  static void count(const Json& s, const char* key, const std::string& path) {
    const Json& v = s[key];
    const bool integral = v.is_number_integer() || v.is_number_unsigned() ||
                          (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>());
    if (!integral || (v.is_number_integer() && v.get<int64_t>() < 0) || (v.is_number_float() && v.get<double>() < 0))
      fail(path, fmt::format("{} must be a non-negative integer", key));
    if (count_of(v) > kMaxCount) fail(path, fmt::format("{} above {} is not supported", key, kMaxCount));
  }

  static void number(const Json& v, const char* key, const std::string& path) {
    if (!v.is_number() || (v.is_number_float() && !std::isfinite(v.get<double>())))
      fail(path, fmt::format("{} must be a number", key));
    try {
      (void)Decimal::parse(v.dump());
    } catch (const GrammarError& e) {
      fail(path, e.what());
    }
  }

  void schema_list(const Json& v, const std::string& key, const std::string& path, const std::string& pointer,
                   int depth, bool non_empty) {
    if (!v.is_array()) fail(path, fmt::format("{} must be an array of schemas", key));
    if (non_empty && v.empty()) fail(path, fmt::format("{} must not be empty", key));
    for (size_t i = 0; i < v.size(); i++) visit(v[i], path_index(path, i), fmt::format("{}/{}", pointer, i), depth + 1);
  }

  void schema_map(const Json& v, const std::string& key, const std::string& path, const std::string& pointer,
                  int depth) {
    if (!v.is_object()) fail(path, fmt::format("{} must be an object of schemas", key));
    for (const auto& [name, sub] : v.items()) visit(sub, path_key(path, name), pointer + "/" + escape(name), depth + 1);
  }

  static std::string escape(const std::string& t) {
    std::string out;
    for (const char c : t) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  }

  void visit(const Json& s, const std::string& path, const std::string& pointer, int depth) {
    if (depth > limits_.max_depth) fail(path, fmt::format("the schema nests deeper than {} levels", limits_.max_depth));
    if (!visited_.insert(pointer).second) return;
    if (s.is_boolean()) return;
    if (!s.is_object()) fail(path, fmt::format("a schema must be an object or a boolean, not {}", kind_of(s)));
    for (const auto& [key, v] : s.items()) keyword(s, key, v, path_key(path, key), pointer + "/" + escape(key), depth);
    const auto order = [&](const char* lo, const char* hi) {
      if (s.contains(lo) && s.contains(hi) && count_of(s[lo]) > count_of(s[hi]))
        fail(path_key(path, hi), fmt::format("{} {} is greater than {} {}", lo, count_of(s[lo]), hi, count_of(s[hi])));
    };
    order("minItems", "maxItems");
    order("minLength", "maxLength");
    if (s.contains("minimum") && s.contains("maximum") &&
        compare(Decimal::parse(s["minimum"].dump()), Decimal::parse(s["maximum"].dump())) > 0)
      fail(path_key(path, "maximum"), "minimum is greater than maximum");
    if (s.contains("anyOf") && s.contains("oneOf")) fail(path_key(path, "oneOf"), "anyOf and oneOf together are not supported");
  }

  void keyword(const Json& s, const std::string& key, const Json& v, const std::string& path,
               const std::string& pointer, int depth) {
    if (key == "$defs" || key == "definitions") return schema_map(v, key, path, pointer, depth);
    if (is_annotation(key)) return;
    if (key == "type") {
      if (v.is_string()) {
        if (!kTypes.count(v.get<std::string>())) fail(path, fmt::format("unknown type '{}'", v.get<std::string>()));
        return;
      }
      if (!v.is_array() || v.empty()) fail(path, "type must be a type name or a non-empty list of them");
      for (size_t i = 0; i < v.size(); i++)
        if (!v[i].is_string() || !kTypes.count(v[i].get<std::string>()))
          fail(path_index(path, i), v[i].is_string() ? fmt::format("unknown type '{}'", v[i].get<std::string>())
                                                     : std::string("a type name must be a string"));
      return;
    }
    if (key == "enum" || key == "const") {
      if (key == "enum" && !v.is_array()) fail(path, "enum must be an array");
      if (deeper_than(v, limits_.max_depth)) fail(path, fmt::format("{} nests deeper than {} levels", key, limits_.max_depth));
      return;
    }
    if (key == "properties") return schema_map(v, key, path, pointer, depth);
    if (key == "required") {
      if (!v.is_array()) fail(path, "required must be an array of property names");
      for (size_t i = 0; i < v.size(); i++)
        if (!v[i].is_string()) fail(path_index(path, i), "a required property name must be a string");
      return;
    }
    if (key == "additionalProperties" || key == "additionalItems") return visit(v, path, pointer, depth + 1);
    if (key == "items") {
      if (v.is_array()) return schema_list(v, key, path, pointer, depth, false);  // draft-4 tuples
      return visit(v, path, pointer, depth + 1);
    }
    if (key == "prefixItems") return schema_list(v, key, path, pointer, depth, false);
    if (key == "minItems" || key == "maxItems" || key == "minLength" || key == "maxLength")
      return count(s, key.c_str(), path);
    if (key == "minimum" || key == "maximum") return number(v, key.c_str(), path);
    if (key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (!v.is_boolean()) number(v, key.c_str(), path);
      return;
    }
    if (key == "pattern") {
      if (!v.is_string()) fail(path, "pattern must be a string");
      try {
        check_regex(v.get<std::string>());
      } catch (const RegexError& e) {
        fail(path, e.what());
      }
      return;
    }
    if (key == "format") {
      if (!v.is_string()) fail(path, "format must be a string");
      if (!format_pattern(v.get<std::string>()))
        fail(path, fmt::format("format '{}' is not supported (date, time, date-time, uuid, email are)", v.get<std::string>()));
      return;
    }
    if (key == "anyOf" || key == "oneOf" || key == "allOf") return schema_list(v, key, path, pointer, depth, true);
    if (key == "$ref") {
      if (!v.is_string()) fail(path, "$ref must be a string");
      std::string target_pointer;
      const Json* target = resolve_ref(root_, v.get<std::string>(), path, &target_pointer);
      if (!target) fail(path, fmt::format("$ref '{}' points to nothing", v.get<std::string>()));
      refs_.push_back({path, target_pointer, target});
      return;
    }
    if (kUnsupported.count(key)) fail(path, fmt::format("keyword '{}' is not supported", key));
    fail(path, fmt::format("unknown keyword '{}'", key));
  }

  struct Ref {
    std::string path, pointer;
    const Json* target;
  };
  const Json& root_;
  const JsonSchemaLimits& limits_;
  std::set<std::string> visited_;  // JSON pointers of schemas checked
  std::vector<Ref> refs_;
};

}  // namespace

void check_schema(const Json& root, const JsonSchemaLimits& limits) { Checker(root, limits).run(); }

}  // namespace lumen::json_schema
