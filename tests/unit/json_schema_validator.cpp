#include "json_schema_validator.h"

#include <cmath>
#include <cstdint>
#include <regex>
#include <stdexcept>

namespace lumen::test {

namespace {

using Json = nlohmann::ordered_json;

std::u32string code_points(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = s[i];
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n && i + k < s.size(); k++) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out += c;
    i += n;
  }
  return out;
}

bool digits(const std::string& s, size_t pos, size_t n) {
  if (pos + n > s.size()) return false;
  for (size_t i = pos; i < pos + n; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

int num(const std::string& s, size_t pos, size_t n) { return std::stoi(s.substr(pos, n)); }

bool is_date(const std::string& s) {
  if (s.size() != 10 || !digits(s, 0, 4) || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' || !digits(s, 8, 2)) return false;
  const int y = num(s, 0, 4), m = num(s, 5, 2), d = num(s, 8, 2);
  if (m < 1 || m > 12 || d < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return d <= kDays[m - 1] + (m == 2 && leap ? 1 : 0);
}

bool is_time(const std::string& s) {
  if (s.size() < 9 || !digits(s, 0, 2) || s[2] != ':' || !digits(s, 3, 2) || s[5] != ':' || !digits(s, 6, 2)) return false;
  if (num(s, 0, 2) > 23 || num(s, 3, 2) > 59 || num(s, 6, 2) > 59) return false;
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
    if (i == start) return false;
  }
  const std::string zone = s.substr(i);
  if (zone == "Z" || zone == "z") return true;
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || !digits(zone, 1, 2) || zone[3] != ':' || !digits(zone, 4, 2))
    return false;
  return num(zone, 1, 2) <= 23 && num(zone, 4, 2) <= 59;
}

bool is_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

bool is_email(const std::string& s) {
  const size_t at = s.rfind('@');
  if (at == std::string::npos || at == 0) return false;
  const std::string local = s.substr(0, at), domain = s.substr(at + 1);
  const std::string atext_punct = "!#$%&'*+/=?^_`{|}~-";
  // dot-atom: atoms of atext separated by single dots.
  bool atom_empty = true;
  for (const char c : local) {
    if (c == '.') {
      if (atom_empty) return false;
      atom_empty = true;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || atext_punct.find(c) != std::string::npos) {
      atom_empty = false;
    } else {
      return false;
    }
  }
  if (atom_empty) return false;
  // host name: two or more labels of letters and digits, hyphens only inside.
  int labels = 0;
  size_t start = 0;
  while (true) {
    const size_t dot = domain.find('.', start);
    const std::string label = domain.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (const char c : label)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    labels++;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return labels >= 2;
}

// JSON equality: objects regardless of member order (ordered_json's == compares in order).
bool same(const Json& a, const Json& b) { return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump()); }

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}

  bool check(const Json& doc, const Json& schema, const std::string& at, std::string* why, int depth = 0) {
    if (depth > 1000) return fail(why, at, "recursion too deep");
    if (schema.is_boolean()) return schema.get<bool>() || fail(why, at, "false schema");
    if (schema.contains("$ref") && !check(doc, resolve(schema["$ref"].get<std::string>()), at, why, depth + 1)) return false;
    if (schema.contains("allOf"))
      for (const Json& s : schema["allOf"])
        if (!check(doc, s, at, why, depth + 1)) return false;
    if (schema.contains("anyOf")) {
      bool any = false;
      for (const Json& s : schema["anyOf"]) any = any || check(doc, s, at, nullptr, depth + 1);
      if (!any) return fail(why, at, "no anyOf branch matches");
    }
    if (schema.contains("oneOf")) {
      int matches = 0;
      for (const Json& s : schema["oneOf"]) matches += check(doc, s, at, nullptr, depth + 1);
      if (matches != 1) return fail(why, at, std::to_string(matches) + " oneOf branches match");
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const Json& e : schema["enum"]) found = found || same(e, doc);
      if (!found) return fail(why, at, "not in enum");
    }
    if (schema.contains("const") && !same(schema["const"], doc)) return fail(why, at, "not the const");
    if (!type_ok(doc, schema)) return fail(why, at, "wrong type");
    if (doc.is_object()) return object(doc, schema, at, why, depth);
    if (doc.is_array()) return array(doc, schema, at, why, depth);
    if (doc.is_string()) return string(doc.get<std::string>(), schema, at, why);
    if (doc.is_number()) return number(doc, schema, at, why);
    return true;
  }

 private:
  static bool fail(std::string* why, const std::string& at, const std::string& what) {
    if (why) *why = at + ": " + what;
    return false;
  }

  const Json& resolve(const std::string& ref) {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0) throw std::runtime_error("validator: unsupported $ref " + ref);
    std::string pointer;
    for (size_t i = 1; i < ref.size(); i++) {
      if (ref[i] == '%' && i + 2 < ref.size()) {
        pointer += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        pointer += ref[i];
      }
    }
    return root_.at(Json::json_pointer(pointer));
  }

  static bool type_ok(const Json& doc, const Json& s) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string()) types.push_back(s["type"]);
      else for (const Json& t : s["type"]) types.push_back(t);
    } else {
      // lumen's dialect: the types the keywords imply.
      const auto has_any = [&](std::initializer_list<const char*> ks) {
        for (const char* k : ks) if (s.contains(k)) return true;
        return false;
      };
      if (has_any({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has_any({"items", "prefixItems", "minItems", "maxItems", "additionalItems"})) types.push_back("array");
      if (has_any({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
      if (types.empty()) return true;
    }
    for (const std::string& t : types) {
      if (t == "null" && doc.is_null()) return true;
      if (t == "boolean" && doc.is_boolean()) return true;
      if (t == "object" && doc.is_object()) return true;
      if (t == "array" && doc.is_array()) return true;
      if (t == "string" && doc.is_string()) return true;
      if (t == "number" && doc.is_number()) return true;
      if (t == "integer" && doc.is_number() && std::floor(doc.get<double>()) == doc.get<double>()) return true;
    }
    return false;
  }

  bool object(const Json& doc, const Json& s, const std::string& at, std::string* why, int depth) {
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (!doc.contains(r.get<std::string>())) return fail(why, at, "missing required " + r.get<std::string>());
    for (const auto& [k, v] : doc.items()) {
      const std::string here = at + "." + k;
      if (s.contains("properties") && s["properties"].contains(k)) {
        if (!check(v, s["properties"][k], here, why, depth + 1)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!check(v, s["additionalProperties"], here, why, depth + 1)) return false;
      }
    }
    return true;
  }

  bool array(const Json& doc, const Json& s, const std::string& at, std::string* why, int depth) {
    const auto count = [&](const char* k) { return static_cast<size_t>(s[k].get<double>()); };
    if (s.contains("minItems") && doc.size() < count("minItems")) return fail(why, at, "too few items");
    if (s.contains("maxItems") && doc.size() > count("maxItems")) return fail(why, at, "too many items");
    const Json none = Json::array();
    const bool tuple = s.contains("items") && s["items"].is_array();
    const Json& prefix = tuple ? s["items"] : s.contains("prefixItems") ? s["prefixItems"] : none;
    const Json* rest = tuple ? (s.contains("additionalItems") ? &s["additionalItems"] : nullptr)
                             : (s.contains("items") ? &s["items"] : nullptr);
    for (size_t i = 0; i < doc.size(); i++) {
      const std::string here = at + "[" + std::to_string(i) + "]";
      if (i < prefix.size()) {
        if (!check(doc[i], prefix[i], here, why, depth + 1)) return false;
      } else if (rest && !check(doc[i], *rest, here, why, depth + 1)) {
        return false;
      }
    }
    return true;
  }

  // std::wregex's \s is the C locale's (ASCII) white space; ECMAScript's also holds U+00A0,
  // U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 and U+FEFF. Spelled out.
  static std::u32string ecmascript_spaces(const std::u32string& p) {
    const std::u32string ws = U"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff";
    std::u32string out;
    bool in_class = false;
    for (size_t i = 0; i < p.size(); i++) {
      if (p[i] == U'\\' && i + 1 < p.size()) {
        const char32_t e = p[i + 1];
        if (e == U's') out += in_class ? ws : U"[" + ws + U"]";
        else if (e == U'S' && !in_class) out += U"[^" + ws + U"]";
        else out += p.substr(i, 2);
        i++;
        continue;
      }
      if (p[i] == U'[') in_class = true;
      else if (p[i] == U']') in_class = false;
      out += p[i];
    }
    return out;
  }

  static bool string(const std::string& v, const Json& s, const std::string& at, std::string* why) {
    const std::u32string cps = code_points(v);
    if (s.contains("minLength") && cps.size() < s["minLength"].get<double>()) return fail(why, at, "too short");
    if (s.contains("maxLength") && cps.size() > s["maxLength"].get<double>()) return fail(why, at, "too long");
    if (s.contains("pattern")) {
      const std::u32string p = ecmascript_spaces(code_points(s["pattern"].get<std::string>()));
      const std::wregex re(std::wstring(p.begin(), p.end()), std::regex::ECMAScript);
      if (!std::regex_search(std::wstring(cps.begin(), cps.end()), re)) return fail(why, at, "pattern does not match");
    }
    if (s.contains("format")) {
      const std::string f = s["format"];
      bool ok = true;
      if (f == "date") ok = is_date(v);
      else if (f == "time") ok = is_time(v);
      else if (f == "date-time") ok = v.size() > 11 && (v[10] == 'T' || v[10] == 't') && is_date(v.substr(0, 10)) && is_time(v.substr(11));
      else if (f == "uuid") ok = is_uuid(v);
      else if (f == "email") ok = is_email(v);
      if (!ok) return fail(why, at, "not a valid " + f);
    }
    return true;
  }

  static bool number(const Json& doc, const Json& s, const std::string& at, std::string* why) {
    const double x = doc.get<double>();
    const auto bound = [&](const char* k) { return s[k].get<double>(); };
    const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"].get<bool>();
    const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"].get<bool>();
    if (s.contains("minimum") && (draft4_min ? x <= bound("minimum") : x < bound("minimum"))) return fail(why, at, "below minimum");
    if (s.contains("maximum") && (draft4_max ? x >= bound("maximum") : x > bound("maximum"))) return fail(why, at, "above maximum");
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() && x <= bound("exclusiveMinimum"))
      return fail(why, at, "not above exclusiveMinimum");
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() && x >= bound("exclusiveMaximum"))
      return fail(why, at, "not below exclusiveMaximum");
    return true;
  }

  const Json& root_;
};

}  // namespace

bool validate_json(const nlohmann::ordered_json& doc, const nlohmann::ordered_json& schema, std::string* why) {
  return Validator(schema).check(doc, schema, "$", why);
}

}  // namespace lumen::test
