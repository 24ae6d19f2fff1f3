// JSON Schema -> grammar text (the policies are in json_schema.h). Three passes: check every
// keyword (json_schema_check.cpp), write one grammar expression per schema (this file; allOf
// folded by json_schema_merge.cpp, each $ref target a rule of its own, written from a queue so
// that recursion in the schema is recursion in the grammar, not in this code), then refuse
// recursion that could not end: left recursion and rules that can never finish.
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "grammar/grammar_builder.h"
#include "grammar/json_schema_internal.h"
#include "grammar/json_string_grammar.h"
#include "grammar/regex_grammar.h"

namespace lumen {

JsonSchemaError::JsonSchemaError(std::string path, const std::string& message)
    : GrammarError(fmt::format("JSON schema: {}: {}", path, message)), path_(std::move(path)) {}

namespace json_schema {
namespace {

// ---- rules every grammar shares ---------------------------------------------------------------

const char* const kSharedRules[] = {"root",        "ws",          "json-value",  "json-object", "json-member",
                                    "json-array",  "json-string", "json-char",   "json-number", "json-integer"};

void reserve_shared(GrammarBuilder& b) {
  for (const char* n : kSharedRules) b.reserve_exact(n);
}

// Whitespace between tokens: nothing, a space, or a newline and up to 16 spaces or tabs. A
// bound keeps a model from padding for ever; a choice of one keeps the language unambiguous.
std::string ws(GrammarBuilder& b) {
  return b.shared("ws", [] { return std::string(R"g(( " " | "\n" [\x20\x09]{0,16} )?)g"); });
}

// Any character of a JSON string, in every spelling JSON allows: raw, a short escape, \uXXXX
// (not a surrogate), or a surrogate pair (one character).
std::string json_char(GrammarBuilder& b) {
  return b.shared("json-char", [] {
    return std::string(
        R"g([\x20-\x21\x23-\x5B\x5D-\uD7FF\uE000-\U0010FFFF] | "\\" [\x22\x5C/bfnrt])g"
        R"g( | "\\u" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ))g"
        R"g( | "\\u" [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})g");
  });
}

std::string json_string(GrammarBuilder& b) {
  return b.shared("json-string", [&] { return R"g("\"" )g" + json_char(b) + R"g(* "\"")g"; });
}

// Numbers that every JSON parser can hold: RFC 8259's syntax with an integer part of at most 20
// digits, a fraction of at most 16 (a double's precision) and an exponent of at most 2
// (magnitudes below 1e120, a finite double; 6e699 is valid JSON that nlohmann, Python and
// others refuse or turn into infinity).
std::string json_number(GrammarBuilder& b) {
  return b.shared("json-number", [] {
    return std::string(R"g("-"? ( "0" | [1-9] [0-9]{0,19} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)g");
  });
}

// Integers from int64's least to uint64's greatest: exact in every 64-bit parser.
const Decimal& integer_floor() {
  static const Decimal d = Decimal::parse("-9223372036854775808");
  return d;
}
const Decimal& integer_ceiling() {
  static const Decimal d = Decimal::parse("18446744073709551615");
  return d;
}
// Bounded numbers stay below 1e20 in magnitude, as json-number's integer part does.
const Decimal& number_limit() {
  static const Decimal d = Decimal::parse("100000000000000000000");
  return d;
}

// `bounds` narrowed to [lo, hi] (each end exclusive or not) where they reach past it.
NumberBounds clamp(NumberBounds bounds, const Decimal& lo, const Decimal& hi, bool exclusive) {
  if (!bounds.lo || compare(*bounds.lo, lo) < 0) bounds.lo = lo, bounds.lo_exclusive = exclusive;
  if (!bounds.hi || compare(*bounds.hi, hi) > 0) bounds.hi = hi, bounds.hi_exclusive = exclusive;
  return bounds;
}

std::string json_integer(GrammarBuilder& b) {
  return b.shared("json-integer", [] { return *integer_range_grammar(clamp({}, integer_floor(), integer_ceiling(), false)); });
}

std::string json_value(GrammarBuilder& b) {
  return b.shared("json-value", [&] {
    const std::string w = ws(b);
    const std::string s = json_string(b), n = json_number(b);
    const std::string object = b.shared("json-object", [&] {
      const std::string member = b.shared("json-member", [&] { return s + " " + w + R"g( ":" )g" + w + " json-value"; });
      return fmt::format(R"g("{{" {0} ( {1} {0} ( "," {0} {1} {0} )* )? "}}")g", w, member);
    });
    const std::string array = b.shared("json-array", [&] {
      return fmt::format(R"g("[" {0} ( json-value {0} ( "," {0} json-value {0} )* )? "]")g", w);
    });
    return fmt::format(R"g({} | {} | {} | {} | "true" | "false" | "null")g", object, array, s, n);
  });
}

// ---- helpers ----------------------------------------------------------------------------------

// A single token (a rule name or one literal): usable anywhere without parentheses.
bool is_token(const std::string& e) {
  if (e.empty()) return false;
  if (e[0] != '"') return e.find_first_of(" ()|") == std::string::npos;
  for (size_t i = 1; i < e.size(); i++) {
    if (e[i] == '\\') i++;
    else if (e[i] == '"') return i + 1 == e.size();
  }
  return false;
}

std::string repeat(const std::string& x, int64_t lo, int64_t hi) {  // hi < 0: unbounded
  if (hi == 0) return "";
  const std::string base = is_token(x) ? x : "( " + x + " )";
  if (lo == 0 && hi == 1) return base + "?";
  if (lo == 0 && hi < 0) return base + "*";
  if (lo == 1 && hi < 0) return base + "+";
  if (lo == 1 && hi == 1) return x;
  if (hi < 0) return fmt::format("{}{{{},}}", base, lo);
  if (lo == hi) return fmt::format("{}{{{}}}", base, lo);
  return fmt::format("{}{{{},{}}}", base, lo, hi);
}

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (size_t i = 0; i < alts.size(); i++) out += (i ? " | " : "") + alts[i];
  return out;
}

std::string seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

// The types a schema allows: its `type`, else what its keywords imply, else all.
struct Types {
  bool null = false, boolean = false, object = false, array = false, string = false, integer = false, number = false;
};

Types types_of(const Json& s) {
  Types t;
  if (s.contains("type")) {
    const Json& v = s["type"];
    const auto set = [&](const std::string& n) {
      if (n == "null") t.null = true;
      else if (n == "boolean") t.boolean = true;
      else if (n == "object") t.object = true;
      else if (n == "array") t.array = true;
      else if (n == "string") t.string = true;
      else if (n == "integer") t.integer = true;
      else if (n == "number") t.number = true;
    };
    if (v.is_string()) set(v.get<std::string>());
    else for (const Json& n : v) set(n.get<std::string>());
    return t;
  }
  for (const char* k : {"properties", "required", "additionalProperties"}) t.object |= s.contains(k);
  for (const char* k : {"items", "prefixItems", "minItems", "maxItems", "additionalItems"}) t.array |= s.contains(k);
  for (const char* k : {"minLength", "maxLength", "pattern", "format"}) t.string |= s.contains(k);
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) t.number |= s.contains(k);
  if (!t.object && !t.array && !t.string && !t.number) t = {true, true, true, true, true, true, true};
  return t;
}

bool value_has_type(const Json& v, const Types& t) {
  switch (v.type()) {
    case Json::value_t::null: return t.null;
    case Json::value_t::boolean: return t.boolean;
    case Json::value_t::object: return t.object;
    case Json::value_t::array: return t.array;
    case Json::value_t::string: return t.string;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return t.integer || t.number;
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      return t.number || (t.integer && d == static_cast<double>(static_cast<int64_t>(d)));
    }
    default: return false;
  }
}

// ---- the converter ----------------------------------------------------------------------------

class Converter {
 public:
  Converter(const Json& root, const JsonSchemaLimits& limits)
      : root_(root), b_(limits.max_grammar_bytes, limits.max_rules), budget_(limits.max_work), merger_(root, arena_, budget_) {}

  std::string run();

 private:
  struct Ctx {
    int owner;     // the $ref rule being written (-1: the root)
    bool guarded;  // a character ({ or [) comes before this point in the owner's rule
  };
  struct RefRule {
    std::string pointer, name, path;                    // path: the first $ref that named it
    std::vector<std::pair<int, std::string>> unguarded;  // refs reached before any character
  };
  using Expr = std::optional<std::string>;

  Expr value(const Json& s, const std::string& path, const std::string& hint, Ctx ctx);
  Expr alternatives(const Json& s, const std::string& path, const std::string& hint, Ctx ctx);
  Expr simple(const Json& s, const std::string& path, const std::string& hint, Ctx ctx);
  Expr enumeration(const Json& s, const std::string& path, const std::string& hint, const Types& types);
  Expr object(const Json& s, const std::string& path, const std::string& hint, Ctx ctx);
  Expr array(const Json& s, const std::string& path, const std::string& hint, Ctx ctx);
  Expr string(const Json& s, const std::string& path, const std::string& hint);
  Expr number(const Json& s, const std::string& hint, bool integer);
  std::string literal(const Json& v, const std::string& path);
  std::string ref_rule(const std::string& ref, const std::string& path, Ctx ctx);
  std::string token(const std::string& hint, const std::string& e) { return is_token(e) ? e : b_.intern(hint, e); }
  void check_recursion();

  const Json& root_;
  GrammarBuilder b_;
  WorkBudget budget_;
  std::deque<Json> arena_;  // schemas made by merging; stable addresses
  SchemaMerger merger_;
  std::vector<RefRule> refs_;
  std::map<std::string, int> ref_index_;  // pointer -> refs_
};

std::string Converter::run() {
  reserve_shared(b_);
  const Expr top = value(root_, "$", "top", {-1, false});
  if (!top) throw JsonSchemaError("$", "the schema accepts no JSON document");
  const std::string w = ws(b_);
  b_.define("root", seq({w, *top, w}));
  for (size_t i = 0; i < refs_.size(); i++) {  // refs_ grows while targets are written
    const std::string pointer = refs_[i].pointer, name = refs_[i].name, path = refs_[i].path;
    std::string ignored;
    const Json* target = resolve_ref(root_, "#" + pointer, path, &ignored);
    const Expr e = value(*target, pointer_path(root_, pointer), name, {static_cast<int>(i), false});
    if (!e) throw JsonSchemaError(path, "the $ref target accepts no value");
    b_.define(name, *e);
  }
  check_recursion();
  return b_.text("root");
}

void Converter::check_recursion() {
  // Left recursion: a cycle of refs reached before any character.
  std::vector<int> color(refs_.size(), 0);  // 0 new, 1 on the path, 2 done
  for (size_t start = 0; start < refs_.size(); start++) {
    if (color[start]) continue;
    std::vector<std::pair<int, size_t>> stack{{static_cast<int>(start), 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == refs_[node].unguarded.size()) {
        color[node] = 2;
        stack.pop_back();
        continue;
      }
      const auto& [to, path] = refs_[node].unguarded[next++];
      if (color[to] == 1)
        throw JsonSchemaError(path, "this $ref recurses without passing through an object or array (left recursion)");
      if (color[to] == 0) {
        color[to] = 1;
        stack.push_back({to, 0});
      }
    }
  }
  // Recursion with no way out (a required property of a schema's own type, all the way down):
  // the model could never finish the document.
  const std::vector<std::string> stuck = b_.unproductive_rules();
  if (stuck.empty()) return;
  for (const RefRule& r : refs_)
    if (std::find(stuck.begin(), stuck.end(), r.name) != stuck.end())
      throw JsonSchemaError(r.path, "every document of this $ref contains itself again: it admits no finite value");
  throw JsonSchemaError("$", "the schema admits no finite document");
}

std::string Converter::ref_rule(const std::string& ref, const std::string& path, Ctx ctx) {
  std::string pointer;
  if (!resolve_ref(root_, ref, path, &pointer)) throw JsonSchemaError(path, fmt::format("$ref '{}' points to nothing", ref));
  auto it = ref_index_.find(pointer);
  if (it == ref_index_.end()) {
    const size_t slash = pointer.rfind('/');
    const std::string hint = pointer.empty() ? "schema" : pointer.substr(slash + 1);
    refs_.push_back({pointer, b_.reserve(hint), path, {}});
    it = ref_index_.emplace(pointer, static_cast<int>(refs_.size() - 1)).first;
  }
  if (!ctx.guarded && ctx.owner >= 0) refs_[ctx.owner].unguarded.emplace_back(it->second, path);
  return refs_[it->second].name;
}

Converter::Expr Converter::value(const Json& s_in, const std::string& path, const std::string& hint, Ctx ctx) {
  const Json* s = &s_in;
  for (;;) {
    budget_.spend(path);
    if (s->is_boolean()) return s->get<bool>() ? Expr(json_value(b_)) : std::nullopt;
    if (is_trivial(*s)) return json_value(b_);
    if (s->contains("allOf")) {
      s = &merger_.merge_all_of(*s, path);
      continue;
    }
    if (s->contains("$ref")) {
      const std::string ref = (*s)["$ref"].get<std::string>();
      Json rest = *s;
      rest.erase("$ref");
      if (is_trivial(rest)) return ref_rule(ref, path_key(path, "$ref"), ctx);
      // Constraints beside the $ref: its target merged with them, in place.
      std::string pointer;
      const Json* target = resolve_ref(root_, ref, path_key(path, "$ref"), &pointer);
      if (!target) throw JsonSchemaError(path_key(path, "$ref"), fmt::format("$ref '{}' points to nothing", ref));
      s = &merger_.merge(*target, rest, path);
      continue;
    }
    if (s->contains("anyOf") || s->contains("oneOf")) return alternatives(*s, path, hint, ctx);
    return simple(*s, path, hint, ctx);
  }
}

Converter::Expr Converter::alternatives(const Json& s, const std::string& path, const std::string& hint, Ctx ctx) {
  const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";  // oneOf as anyOf (json_schema.h)
  Json rest = s;
  rest.erase(key);
  const bool plain = is_trivial(rest);
  const Json& members = s[key];
  std::vector<std::string> alts;
  std::set<std::string> seen;
  size_t size = 0;
  for (size_t i = 0; i < members.size(); i++) {
    const std::string mpath = path_index(path_key(path, key), i);
    // Constraints beside anyOf apply to every branch: each branch merged with them.
    const Json& m = plain ? members[i] : merger_.merge(rest, members[i], mpath);
    const Expr e = value(m, mpath, fmt::format("{}-{}", hint, i), ctx);
    if (e && seen.insert(*e).second) {
      alts.push_back(*e);
      b_.check_room(size += e->size() + 3);
    }
  }
  if (alts.empty()) return std::nullopt;
  if (alts.size() == 1) return alts[0];
  return b_.intern(hint, join_alternatives(alts));
}

Converter::Expr Converter::simple(const Json& s, const std::string& path, const std::string& hint, Ctx ctx) {
  const Types t = types_of(s);
  if (s.contains("enum") || s.contains("const")) return enumeration(s, path, hint, t);
  std::vector<std::string> alts;
  const auto add = [&](const Expr& e) {
    if (e) alts.push_back(*e);
  };
  if (t.null) alts.push_back(grammar_literal("null"));
  if (t.boolean) alts.push_back(b_.intern("boolean", R"g("true" | "false")g"));
  if (t.object) add(object(s, path, hint, ctx));
  if (t.array) add(array(s, path, hint, ctx));
  if (t.string) add(string(s, path, hint));
  if (t.number) add(number(s, hint + "-number", false));
  else if (t.integer) add(number(s, hint + "-integer", true));
  if (alts.empty()) return std::nullopt;
  if (alts.size() == 1) return alts[0];
  return b_.intern(hint, join_alternatives(alts));
}

Converter::Expr Converter::enumeration(const Json& s, const std::string& path, const std::string& hint, const Types& t) {
  for (const auto& [k, v] : s.items())
    if (!is_annotation(k) && k != "type" && k != "enum" && k != "const")
      throw JsonSchemaError(path_key(path, k), fmt::format("'{}' beside enum or const is not supported", k));
  std::vector<const Json*> values;
  std::vector<std::string> paths;
  if (s.contains("enum")) {
    const Json& e = s["enum"];
    for (size_t i = 0; i < e.size(); i++)
      if (!s.contains("const") || e[i] == s["const"]) values.push_back(&e[i]), paths.push_back(path_index(path_key(path, "enum"), i));
  } else {
    values.push_back(&s["const"]);
    paths.push_back(path_key(path, "const"));
  }
  std::vector<std::string> alts;
  std::set<std::string> seen;
  size_t size = 0;
  for (size_t i = 0; i < values.size(); i++) {
    if (s.contains("type") && !value_has_type(*values[i], t)) continue;
    std::string lit = literal(*values[i], paths[i]);
    b_.check_room(size += lit.size() + 3);
    if (seen.insert(lit).second) alts.push_back(std::move(lit));
  }
  if (alts.empty()) return std::nullopt;
  if (alts.size() == 1) return token(hint, alts[0]);
  return b_.intern(hint, join_alternatives(alts));
}

std::string Converter::literal(const Json& v, const std::string& path) {
  const std::string w = ws(b_);
  switch (v.type()) {
    case Json::value_t::string:
      try {
        return json_string_literal(decode_utf8(v.get<std::string>()));
      } catch (const JsonSchemaError&) {
        throw;
      } catch (const GrammarError& e) {
        throw JsonSchemaError(path, e.what());
      }
    case Json::value_t::array: {
      if (v.empty()) return seq({grammar_literal("["), w, grammar_literal("]")});
      std::string out = seq({grammar_literal("["), w});
      for (size_t i = 0; i < v.size(); i++)
        out = seq({out, i ? seq({grammar_literal(","), w}) : "", literal(v[i], path_index(path, i)), w});
      return seq({out, grammar_literal("]")});
    }
    case Json::value_t::object: {
      if (v.empty()) return seq({grammar_literal("{"), w, grammar_literal("}")});
      std::string out = seq({grammar_literal("{"), w});
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        out = seq({out, first ? "" : seq({grammar_literal(","), w}), literal(Json(k), path), w, grammar_literal(":"), w,
                   literal(x, path_key(path, k)), w});
        first = false;
      }
      return seq({out, grammar_literal("}")});
    }
    default: return grammar_literal(v.dump());
  }
}

Converter::Expr Converter::object(const Json& s, const std::string& path, const std::string& hint, Ctx ctx) {
  const Ctx inner{ctx.owner, true};
  const std::string w = ws(b_), comma = grammar_literal(","), colon = grammar_literal(":");
  const Json any = true;
  const Json& extra = s.contains("additionalProperties") ? s["additionalProperties"] : any;
  const std::string extra_path = path_key(path, "additionalProperties");
  std::vector<std::string> required;
  std::set<std::string> required_set, declared;
  if (s.contains("required"))
    for (const Json& r : s["required"])
      if (required_set.insert(r.get<std::string>()).second) required.push_back(r.get<std::string>());
  const auto is_required = [&](const std::string& k) { return required_set.count(k) != 0; };

  struct Slot {
    std::string member;
    bool required;
  };
  std::vector<Slot> slots;
  size_t size = 0;
  std::vector<std::u32string> names;  // every declared name: never an additional property
  const auto add_slot = [&](const std::string& name, const Expr& val, const std::string& name_path) -> bool {
    std::u32string decoded;
    try {
      decoded = decode_utf8(name);
    } catch (const GrammarError& e) {
      throw JsonSchemaError(name_path, e.what());
    }
    names.push_back(decoded);
    declared.insert(name);
    if (!val) return !is_required(name);  // a name that can have no value: absent, or no object at all
    slots.push_back({seq({json_string_literal(decoded), w, colon, w, *val}), is_required(name)});
    b_.check_room(size += 2 * slots.back().member.size());
    return true;
  };
  if (s.contains("properties")) {
    for (const auto& [name, sub] : s["properties"].items()) {
      const std::string ppath = path_key(path_key(path, "properties"), name);
      if (!add_slot(name, value(sub, ppath, hint + "-" + name, inner), ppath)) return std::nullopt;
    }
  }
  for (const std::string& name : required) {  // required but not declared: additionalProperties decides
    if (declared.count(name)) continue;
    if (!add_slot(name, value(extra, extra_path, hint + "-" + name, inner), path_key(path, "required"))) return std::nullopt;
  }
  Expr extra_member;
  if (!(extra.is_boolean() && !extra.get<bool>())) {
    if (const Expr val = value(extra, extra_path, hint + "-extra", inner)) {
      const std::string key = names.empty() ? json_string(b_) : json_string_except(names, b_, hint);
      extra_member = b_.intern(hint + "-extra-member", seq({key, w, colon, w, *val}));
    }
  }

  // Members in declared order, then additional ones. after[i]: what may follow once a member
  // has been written and slots before i are settled (each member preceded by a comma).
  const size_t n = slots.size();
  std::vector<std::string> after(n + 1);
  if (extra_member) after[n] = repeat(seq({comma, w, *extra_member, w}), 0, -1);
  for (size_t i = n; i-- > 0;) {
    const std::string member = seq({comma, w, slots[i].member, w});
    std::string e = slots[i].required ? seq({member, after[i + 1]}) : seq({repeat(member, 0, 1), after[i + 1]});
    // Long tails become rules: several first members share them, and text must not repeat.
    after[i] = e.size() > 80 ? b_.intern(hint + "-rest", e) : e;
  }
  std::vector<std::string> first;  // the first member written: any slot up to the first required one
  bool all_optional = true;
  for (size_t i = 0; i < n; i++) {
    first.push_back(seq({slots[i].member, w, after[i + 1]}));
    if (slots[i].required) {
      all_optional = false;
      break;
    }
  }
  if (all_optional && extra_member) first.push_back(seq({*extra_member, w, after[n]}));
  std::string body = seq({grammar_literal("{"), w});
  if (!first.empty()) body += " ( " + join_alternatives(first) + (all_optional ? " )?" : " )");
  body = seq({body, grammar_literal("}")});
  return b_.intern(hint, body);
}

Converter::Expr Converter::array(const Json& s, const std::string& path, const std::string& hint, Ctx ctx) {
  const Ctx inner{ctx.owner, true};
  const std::string w = ws(b_), comma = grammar_literal(",");
  const Json any = true, none = Json::array();
  const bool legacy = s.contains("items") && s["items"].is_array();  // draft-4 tuples
  const Json& prefix = legacy ? s["items"] : s.contains("prefixItems") ? s["prefixItems"] : none;
  const char* prefix_key = legacy ? "items" : "prefixItems";
  const char* rest_key = legacy ? "additionalItems" : "items";
  const Json& rest = s.contains(rest_key) ? s[rest_key] : any;
  int64_t min = s.contains("minItems") ? count_of(s["minItems"]) : 0;
  int64_t max = s.contains("maxItems") ? count_of(s["maxItems"]) : -1;
  const auto cap = [&](int64_t n) { max = max < 0 ? n : std::min(max, n); };

  std::vector<std::string> items;  // the prefix items that can exist
  for (size_t i = 0; i < prefix.size() && (max < 0 || int64_t(i) < max); i++) {
    const Expr e = value(prefix[i], path_index(path_key(path, prefix_key), i), fmt::format("{}-{}", hint, i), inner);
    if (!e) break;  // no value here: the array ends before it
    items.push_back(*e);
  }
  const int64_t k = static_cast<int64_t>(items.size());
  if (k < static_cast<int64_t>(prefix.size())) cap(k);
  Expr more;
  if (max < 0 || max > k) more = value(rest, path_key(path, rest_key), hint + "-item", inner);
  if (!more) cap(k);
  if (max >= 0 && min > max) return std::nullopt;

  const auto element = [&](int64_t i) { return i < k ? items[i] : *more; };
  // tail(i): elements i.. (each after a comma) once i elements are written.
  std::string tail;
  if (more) {
    const int64_t lo = std::max<int64_t>(min - k, 0), hi = max < 0 ? -1 : max - k;
    tail = repeat(seq({comma, w, *more, w}), k == 0 ? std::max<int64_t>(lo - 1, 0) : lo, k == 0 && hi > 0 ? hi - 1 : hi);
  }
  std::string list;
  if (k == 0) {
    if (more && max != 0) list = seq({*more, w, tail});
  } else {
    for (int64_t i = k - 1; i >= 1; i--) {
      const std::string member = seq({comma, w, element(i), w});
      tail = i < min ? seq({member, tail}) : b_.intern(hint + "-tail", repeat(seq({member, tail}), 0, 1));
    }
    list = seq({element(0), w, tail});
  }
  std::string body = seq({grammar_literal("["), w});
  if (!list.empty()) body += (min == 0 ? " ( " + list + " )?" : " " + list);
  body = seq({body, grammar_literal("]")});
  return b_.intern(hint, body);
}

Converter::Expr Converter::string(const Json& s, const std::string& path, const std::string& hint) {
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  const char* length_key = s.contains("minLength") ? "minLength" : "maxLength";
  if (s.contains("pattern") && s.contains("format"))
    throw JsonSchemaError(path_key(path, "format"), "pattern and format together are not supported");
  if (lengths && (s.contains("pattern") || s.contains("format")))
    throw JsonSchemaError(path_key(path, length_key),
                          fmt::format("{} together with {} is not supported", length_key, s.contains("pattern") ? "pattern" : "format"));
  const std::string quote = grammar_literal("\"");
  if (s.contains("pattern") || s.contains("format")) {
    const bool is_pattern = s.contains("pattern");
    const std::string text = is_pattern ? s["pattern"].get<std::string>() : format_pattern(s["format"].get<std::string>());
    const std::string name = is_pattern ? hint : s["format"].get<std::string>();
    Expr content;
    try {
      content = regex_to_grammar(text, b_, name);
    } catch (const RegexError& e) {
      throw JsonSchemaError(path_key(path, is_pattern ? "pattern" : "format"), e.what());
    }
    if (!content) return std::nullopt;
    return b_.intern(is_pattern ? hint : name, seq({quote, *content, quote}));
  }
  if (!lengths) return json_string(b_);
  const int64_t min = s.contains("minLength") ? count_of(s["minLength"]) : 0;
  const int64_t max = s.contains("maxLength") ? count_of(s["maxLength"]) : -1;
  if (max >= 0 && min > max) return std::nullopt;
  const std::string chars = repeat(json_char(b_), min, max);
  return b_.intern(hint + "-string", seq({quote, chars, quote}));
}

Converter::Expr Converter::number(const Json& s, const std::string& hint, bool integer) {
  const NumberBounds given = number_bounds(s);
  if (given.empty()) return integer ? json_integer(b_) : json_number(b_);
  Decimal minus_limit = number_limit();
  minus_limit.negative = true;
  const Expr e = integer ? integer_range_grammar(clamp(given, integer_floor(), integer_ceiling(), false))
                         : number_range_grammar(clamp(given, minus_limit, number_limit(), true));
  if (!e) return std::nullopt;
  return token(hint, *e);
}

}  // namespace
}  // namespace json_schema

std::string json_schema_to_grammar(const nlohmann::ordered_json& schema, const JsonSchemaLimits& limits) {
  json_schema::check_schema(schema, limits);
  try {
    return json_schema::Converter(schema, limits).run();
  } catch (const JsonSchemaError&) {
    throw;
  } catch (const GrammarError& e) {  // the builder's limits
    throw JsonSchemaError("$", e.what());
  }
}

std::string json_object_grammar() {
  GrammarBuilder b(1u << 20, 64);
  json_schema::reserve_shared(b);
  json_schema::json_value(b);
  const std::string w = json_schema::ws(b);
  b.define("root", w + " json-object " + w);
  return b.text("root");
}

}  // namespace lumen
