// JSON Schema -> grammar: the text form of grammar/grammar.h whose language is the JSON documents
// a schema accepts, for constrained decoding (response_format json_schema, tool parameters).
//
// The dialect (README "JSON Schema"): draft 2020-12 keywords, plus draft-4/7 spellings that
// older generators (Pydantic v1, OpenAPI tools) still emit.
//   type (a name or a list), enum, const,
//   properties, required, additionalProperties,
//   items, prefixItems, minItems, maxItems (legacy: items as a list with additionalItems),
//   minLength, maxLength, pattern, format (date, time, date-time, uuid, email),
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers, or draft-4 booleans),
//   anyOf, oneOf, allOf, $ref with $defs / definitions (local refs: #, #/$defs/x, any #/pointer),
//   and annotations that constrain nothing: title, description, $schema, $id, $comment,
//   default, examples, deprecated, readOnly, writeOnly, strict.
// Every other keyword (not, if/then/else, patternProperties, uniqueItems, multipleOf, ...) is a
// JsonSchemaError naming its path: a keyword is never dropped silently, since that would let
// the model write documents the schema refuses.
//
// Where the grammar is narrower or wider than JSON Schema, on purpose:
//   - Whitespace: between tokens nothing, one space, or a newline and up to 16 spaces or tabs
//     (rule `ws`); also before and after the document. Bounded, so a model cannot pad forever;
//     compact JSON and 2-space indentation up to 8 levels deep are both inside it.
//   - Object members come in the order of `properties` (required ones present, optional ones
//     omissible), then additional properties. Without `additionalProperties`, JSON Schema allows
//     any further member, and so does the grammar (after the declared ones, never repeating a
//     declared name; two additional members with the same name cannot be ruled out by a
//     context-free grammar). `additionalProperties: false` allows none.
//   - A schema without `type` takes the types its keywords imply (`properties` -> object,
//     `items` -> array, `pattern` -> string, `minimum` -> number, ...); with none, any value.
//     JSON Schema would also accept values of the other types, which is never what is meant.
//   - oneOf is treated as anyOf: a document matching two branches is not refused.
//   - Integers are written as integers (`-?(0|[1-9][0-9]*)`), never as 1.0 or 1e2, and lie
//     between int64's least and uint64's greatest. Numbers with bounds are written without an
//     exponent (exact decimal comparison against the bound) and below 1e20 in magnitude;
//     numbers without bounds take RFC 8259's syntax with an integer part of at most 20 digits,
//     a fraction of at most 16 and an exponent of at most 2: every number the grammar writes
//     is a finite double (6e699 is valid JSON that nlohmann, Python and most parsers refuse or
//     make infinite).
//   - Strings of free text (any characters, or a length range in code points) take every JSON
//     escape, surrogate pairs counting as one character. Strings whose characters are
//     constrained (pattern, format, enum, const, property names) take each character raw or,
//     where JSON requires it, escaped (\" \\ \b \f \n \r \t or \u00XX for control characters;
//     \/ also for /): spelling other characters as \uXXXX is outside the grammar.
//   - enum and const values are written as their JSON text (whitespace between tokens as
//     above, object members in the listed order, numbers as dumped: 1.0 stays 1.0).
//   - pattern: an ECMAScript subset (grammar/regex_grammar.h), searched like JSON Schema does
//     (unanchored unless ^ / $); \s writes only ASCII spaces and \S no Unicode space, where
//     regex engines agree. pattern, format and minLength/maxLength cannot be combined.
//   - Counts (minItems, maxItems, minLength, maxLength) above 10,000 are refused; so are
//     patterns and schemas whose grammar would pass the limits below.
//   - format date: leap years exact; time and date-time: RFC 3339 with a required offset,
//     seconds 00-59 (no leap second), T/Z in either case; uuid: 8-4-4-4-12 hex digits; email:
//     a dot-atom local part @ a host name of two or more labels (no quoted local parts, no
//     address literals).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace lumen {

// A schema the converter refuses. path() is the JSON path of the offending keyword or value
// ("$.properties.age.minimum", "$.items.anyOf[1].pattern"); what() names it too.
class JsonSchemaError : public GrammarError {
 public:
  JsonSchemaError(std::string path, const std::string& message);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct JsonSchemaLimits {
  int max_depth = 128;                // nested schemas (and enum/const values)
  size_t max_grammar_bytes = 4u << 20;
  size_t max_rules = 100000;
  size_t max_work = 2000000;          // schema nodes visited and merged (allOf, anyOf + siblings)
};

// The grammar (root rule `root`) for the documents `schema` accepts. Key order matters for
// `properties`, hence ordered_json (what the server parses requests into).
std::string json_schema_to_grammar(const nlohmann::ordered_json& schema, const JsonSchemaLimits& limits = {});

// The grammar for any JSON object (response_format json_object).
std::string json_object_grammar();

}  // namespace lumen
