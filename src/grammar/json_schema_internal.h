// What the parts of the JSON-schema converter share (json_schema_check.cpp validates the
// schema's keywords, json_schema_merge.cpp folds allOf, json_schema.cpp writes the grammar).
// Not a public interface.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/number_range_grammar.h"

namespace lumen::json_schema {

using Json = nlohmann::ordered_json;

// Keywords that constrain nothing (and $defs / definitions, whose schemas count only when a
// $ref reaches them).
bool is_annotation(const std::string& keyword);
// True or an object of annotations only: any value.
bool is_trivial(const Json& schema);

// JSON paths as errors show them: $.properties.age, $.anyOf[1], $.properties["a b"].
std::string path_key(const std::string& path, const std::string& key);
std::string path_index(const std::string& path, size_t i);

// A local $ref ("#", "#/$defs/x", "#/definitions/x", any "#/json/pointer", %-escapes decoded):
// the target, or nullptr when it points to nothing. `pointer` receives the canonical JSON
// pointer (the target's identity). Throws JsonSchemaError at `path` for a non-local ref.
const Json* resolve_ref(const Json& root, const std::string& ref, const std::string& path, std::string* pointer);
// The display path of a JSON pointer into `root`.
std::string pointer_path(const Json& root, const std::string& pointer);

// The formats `format` takes, as patterns of the regex subset (anchored).
const char* format_pattern(const std::string& format);  // nullptr: unsupported

// minimum / maximum / exclusive* of a schema (draft-4 boolean exclusives included).
NumberBounds number_bounds(const Json& schema);

// A non-negative integer keyword's value (minItems, maxLength, ...).
int64_t count_of(const Json& value);

// Every schema reachable from `root` (its subschemas, $defs, $ref targets): keywords known,
// values well-formed, nesting within limits. Throws JsonSchemaError naming the path.
void check_schema(const Json& root, const JsonSchemaLimits& limits);

// Counts work (schemas visited, merged) against JsonSchemaLimits::max_work.
class WorkBudget {
 public:
  explicit WorkBudget(size_t max) : left_(max) {}
  void spend(const std::string& path) {
    if (left_-- == 0) throw JsonSchemaError(path, "the schema is too complex to convert (work limit)");
  }

 private:
  size_t left_;
};

// allOf, and $ref or anyOf/oneOf with constraining siblings, folded into one schema.
class SchemaMerger {
 public:
  SchemaMerger(const Json& root, std::deque<Json>& arena, WorkBudget& budget)
      : root_(root), arena_(arena), budget_(budget) {}
  // `schema` without its allOf, merged with every member.
  const Json& merge_all_of(const Json& schema, const std::string& path);
  // The schema that both accept. `path` names the site in errors.
  const Json& merge(const Json& a, const Json& b, const std::string& path);

 private:
  Json merge_values(const Json& a, const Json& b, const std::string& path, int depth);
  Json flatten(const Json& s, const std::string& path, int depth);
  const Json& root_;
  std::deque<Json>& arena_;
  WorkBudget& budget_;
};

}  // namespace lumen::json_schema
