// The request fields of structured output, validated with the rest of the request (a fault is
// an ApiError 400 naming the field), and the grammar they resolve to, compiled before anything
// is queued:
//   response_format (both endpoints): {"type": "text"} | {"type": "json_object"} |
//     {"type": "json_schema", "json_schema": {"name"?, "schema": {...}, "strict"?, "description"?}}
//   grammar (both endpoints, an extension): the text form of grammar/grammar.h
//   tools, tool_choice, parallel_tool_calls (chat; server/tool_calls.h)
// At most one of them may constrain the output: a grammar beside a json response_format, or
// either beside tool_choice "required" or a named function, is a 400.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/tool_calls.h"

namespace lumen {
struct Grammar;
}

namespace lumen::server {

class GrammarCache;

struct OutputConstraint {
  enum class Kind { None, Grammar, JsonObject, JsonSchema };
  Kind kind = Kind::None;
  Json schema;          // JsonSchema: response_format.json_schema.schema
  std::string grammar;  // Grammar: the `grammar` field's text
};

// response_format and grammar; throws ApiError 400.
OutputConstraint parse_output_constraint(const Json& body);

// tools, tool_choice and parallel_tool_calls; throws ApiError 400. Also refuses a constraining
// tool_choice beside a constraining `constraint`.
ToolRequest parse_tool_request(const Json& body, const OutputConstraint& constraint);

// The compiled grammar the output must follow (nullptr: unconstrained), through `cache`. A
// schema the converter refuses is a 400 whose param is the schema's field and whose message
// names the keyword's JSON path; a grammar that does not compile is a 400 naming `grammar`.
std::shared_ptr<const Grammar> resolve_output_grammar(const OutputConstraint& constraint, const ToolRequest& tools,
                                                      ToolCallFormat format, GrammarCache& cache);

}  // namespace lumen::server
