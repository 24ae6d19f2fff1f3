// allOf: the members folded into one schema, keyword by keyword, so that the grammar writer
// sees a single object / array / string / number description. What two members may both
// constrain: type (intersected), enum (intersected), const, required (joined), properties and
// additionalProperties (per property name, what every member allows), items and prefixItems
// (per position), the counts and bounds (the tighter wins), pattern and format (only when
// equal). Two members both with anyOf/oneOf are refused (the product of alternations).
// A $ref merged with constraints is inlined (its target merged), up to a depth limit.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "grammar/json_schema_internal.h"

namespace lumen::json_schema {

namespace {

constexpr int kMaxMergeDepth = 32;

bool has_alternatives(const Json& s) { return s.is_object() && (s.contains("anyOf") || s.contains("oneOf")); }

bool is_false(const Json& s) { return s.is_boolean() && !s.get<bool>(); }

std::vector<std::string> type_names(const Json& t) {
  if (t.is_string()) return {t.get<std::string>()};
  std::vector<std::string> out;
  for (const Json& n : t) out.push_back(n.get<std::string>());
  return out;
}

// Types in both lists (integer is a number).
Json intersect_types(const Json& a, const Json& b) {
  const auto ta = type_names(a), tb = type_names(b);
  const auto has = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  Json out = Json::array();
  for (const std::string& n : ta) {
    if (has(tb, n) || (n == "integer" && has(tb, "number"))) out.push_back(n);
    else if (n == "number" && has(tb, "integer")) out.push_back("integer");
  }
  return out;
}

Json decimal_json(const Decimal& d) { return Json::parse(d.str()); }

}  // namespace

const Json& SchemaMerger::merge_all_of(const Json& schema, const std::string& path) {
  Json acc = schema;
  acc.erase("allOf");
  const Json& members = schema["allOf"];
  for (size_t i = 0; i < members.size(); i++) acc = merge_values(acc, members[i], path_index(path_key(path, "allOf"), i), 0);
  arena_.push_back(std::move(acc));
  return arena_.back();
}

const Json& SchemaMerger::merge(const Json& a, const Json& b, const std::string& path) {
  arena_.push_back(merge_values(a, b, path, 0));
  return arena_.back();
}

Json SchemaMerger::flatten(const Json& s, const std::string& path, int depth) {
  Json x = s;
  for (int steps = 0; x.is_object() && (x.contains("allOf") || x.contains("$ref")); steps++) {
    budget_.spend(path);
    if (steps > kMaxMergeDepth) throw JsonSchemaError(path, "allOf: a chain of $ref / allOf too long to merge (is it cyclic?)");
    if (x.contains("allOf")) {
      const Json members = x["allOf"];
      x.erase("allOf");
      for (const Json& m : members) x = merge_values(x, m, path, depth + 1);
    } else {
      std::string pointer;
      const Json* target = resolve_ref(root_, x["$ref"].get<std::string>(), path, &pointer);
      if (!target) throw JsonSchemaError(path, fmt::format("$ref '{}' points to nothing", x["$ref"].get<std::string>()));
      x.erase("$ref");
      x = merge_values(*target, x, path, depth + 1);
    }
  }
  // Draft-4 tuples as prefixItems, so that both spellings merge alike.
  if (x.is_object() && x.contains("items") && x["items"].is_array()) {
    x["prefixItems"] = x["items"];
    if (x.contains("additionalItems")) x["items"] = x["additionalItems"];
    else x.erase("items");
  }
  if (x.is_object()) x.erase("additionalItems");
  return x;
}

Json SchemaMerger::merge_values(const Json& a_in, const Json& b_in, const std::string& path, int depth) {
  budget_.spend(path);
  if (depth > kMaxMergeDepth) throw JsonSchemaError(path, fmt::format("allOf merges nest deeper than {} (a recursive $ref?)", kMaxMergeDepth));
  if (is_false(a_in) || is_false(b_in)) return false;
  if (is_trivial(a_in)) return b_in;
  if (is_trivial(b_in)) return a_in;
  const Json a = flatten(a_in, path, depth), b = flatten(b_in, path, depth);
  if (is_false(a) || is_false(b)) return false;
  if (is_trivial(a)) return b;
  if (is_trivial(b)) return a;
  if (has_alternatives(a) && has_alternatives(b))
    throw JsonSchemaError(path, "allOf of members that both have anyOf/oneOf is not supported");

  Json out = Json::object();
  const auto both = [&](const char* k) { return a.contains(k) && b.contains(k); };
  const auto either = [&](const char* k) { return a.contains(k) || b.contains(k); };
  const auto copy_one = [&](const std::string& k) { out[k] = a.contains(k) ? a[k] : b[k]; };

  for (const Json* side : {&a, &b}) {
    for (const auto& [key, v] : side->items()) {
      if (out.contains(key) || is_annotation(key)) continue;
      if (key == "properties" || key == "additionalProperties" || key == "items" || key == "prefixItems" ||
          key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum")
        continue;  // below, together with their partners
      if (!both(key.c_str())) {
        copy_one(key);
        continue;
      }
      const Json &va = a[key], &vb = b[key];
      if (key == "type") {
        out[key] = intersect_types(va, vb);
        if (out[key].empty()) return false;
      } else if (key == "enum") {
        Json values = Json::array();
        const std::set<Json> in_b(vb.begin(), vb.end());
        for (const Json& e : va)
          if (in_b.count(e)) values.push_back(e);
        out[key] = values;
      } else if (key == "const") {
        if (va != vb) return false;
        out[key] = va;
      } else if (key == "required") {
        Json names = va;
        std::set<Json> have(va.begin(), va.end());
        for (const Json& n : vb)
          if (have.insert(n).second) names.push_back(n);
        out[key] = names;
      } else if (key == "minItems" || key == "minLength") {
        out[key] = count_of(va) >= count_of(vb) ? va : vb;
      } else if (key == "maxItems" || key == "maxLength") {
        out[key] = count_of(va) <= count_of(vb) ? va : vb;
      } else if (key == "pattern" || key == "format") {
        if (va != vb) throw JsonSchemaError(path, fmt::format("allOf with two different {}s is not supported", key));
        out[key] = va;
      } else {
        throw JsonSchemaError(path, fmt::format("allOf: cannot merge keyword '{}'", key));
      }
    }
  }

  // Per property name: what both sides allow there (a side without the name allows what its
  // additionalProperties does).
  if (either("properties") || either("additionalProperties")) {
    const Json any = true;
    const Json& aa = a.contains("additionalProperties") ? a["additionalProperties"] : any;
    const Json& ba = b.contains("additionalProperties") ? b["additionalProperties"] : any;
    // Indexes: ordered_json finds keys by a linear scan.
    std::map<std::string, const Json*> pa, pb;
    if (a.contains("properties")) for (const auto& [name, sub] : a["properties"].items()) pa.emplace(name, &sub);
    if (b.contains("properties")) for (const auto& [name, sub] : b["properties"].items()) pb.emplace(name, &sub);
    Json props = Json::object();
    std::set<std::string> done;
    for (const Json* side : {&a, &b}) {
      if (!side->contains("properties")) continue;
      for (const auto& [name, sub] : (*side)["properties"].items()) {
        if (!done.insert(name).second) continue;
        const Json& sa = pa.count(name) ? *pa[name] : aa;
        const Json& sb = pb.count(name) ? *pb[name] : ba;
        props.push_back({name, merge_values(sa, sb, path_key(path_key(path, "properties"), name), depth + 1)});
      }
    }
    if (!props.empty()) out["properties"] = props;
    if (either("additionalProperties")) out["additionalProperties"] = merge_values(aa, ba, path_key(path, "additionalProperties"), depth + 1);
  }

  // Per position: prefixItems where either has one, the side's items beyond its own.
  if (either("items") || either("prefixItems")) {
    const Json any = true, none = Json::array();
    const Json& pa = a.contains("prefixItems") ? a["prefixItems"] : none;
    const Json& pb = b.contains("prefixItems") ? b["prefixItems"] : none;
    const Json& ia = a.contains("items") ? a["items"] : any;
    const Json& ib = b.contains("items") ? b["items"] : any;
    Json prefix = Json::array();
    for (size_t i = 0; i < std::max(pa.size(), pb.size()); i++)
      prefix.push_back(merge_values(i < pa.size() ? pa[i] : ia, i < pb.size() ? pb[i] : ib,
                                    path_index(path_key(path, "prefixItems"), i), depth + 1));
    if (!prefix.empty()) out["prefixItems"] = prefix;
    if (either("items")) out["items"] = merge_values(ia, ib, path_key(path, "items"), depth + 1);
  }

  // Bounds: the tighter of each side, as draft-2020 keywords.
  if (either("minimum") || either("maximum") || either("exclusiveMinimum") || either("exclusiveMaximum")) {
    const NumberBounds na = number_bounds(a), nb = number_bounds(b);
    const auto pick = [](const std::optional<Decimal>& x, bool xe, const std::optional<Decimal>& y, bool ye, bool lower,
                         std::optional<Decimal>& d, bool& e) {
      if (!x || !y) {
        d = x ? x : y;
        e = x ? xe : ye;
        return;
      }
      const int c = compare(*x, *y);
      if (c == 0) d = x, e = xe || ye;
      else if ((c > 0) == lower) d = x, e = xe;
      else d = y, e = ye;
    };
    NumberBounds m;
    pick(na.lo, na.lo_exclusive, nb.lo, nb.lo_exclusive, true, m.lo, m.lo_exclusive);
    pick(na.hi, na.hi_exclusive, nb.hi, nb.hi_exclusive, false, m.hi, m.hi_exclusive);
    if (m.lo) out[m.lo_exclusive ? "exclusiveMinimum" : "minimum"] = decimal_json(*m.lo);
    if (m.hi) out[m.hi_exclusive ? "exclusiveMaximum" : "maximum"] = decimal_json(*m.hi);
  }
  return out;
}

}  // namespace lumen::json_schema
