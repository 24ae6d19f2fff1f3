// A small JSON Schema validator for the tests, written apart from the grammar converter
// (grammar/json_schema.h) so that each checks the other: documents the grammar accepts must
// validate here, and documents refused here must be refused by the grammar.
//
// It implements lumen's dialect as json_schema.h documents it (the same keywords; a schema
// without `type` takes the types its keywords imply), by the rules of JSON Schema rather
// than of the converter: oneOf means exactly one branch, property order is free, 1.0 is an
// integer, patterns are std::wregex ECMAScript searches over code points.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lumen::test {

// True when `doc` is valid under `schema`; otherwise false and, if `why` is given, the first
// failure found (a JSON path and what was wrong).
bool validate_json(const nlohmann::ordered_json& doc, const nlohmann::ordered_json& schema, std::string* why = nullptr);

}  // namespace lumen::test
