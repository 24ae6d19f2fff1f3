// libFuzzer target: JSON Schema -> grammar -> compiled grammar. Any bytes must end as a parse
// error, a JsonSchemaError or a GrammarError (a schema the converter or the grammar compiler
// refuses, with a message), never a crash, a hang, another exception type or unbounded
// recursion on deep nesting.
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The parser and the destructor of a parsed value recurse once per level: bound the nesting
  // first, as the server does, but above the converter's own limit so that it is exercised.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > 512) return 0;
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::exception&) {
    return 0;
  }
  std::string grammar;
  try {
    grammar = lumen::json_schema_to_grammar(schema);
  } catch (const lumen::GrammarError&) {  // JsonSchemaError too
    return 0;
  }
  try {
    (void)lumen::compile_grammar(grammar);
  } catch (const lumen::GrammarError&) {
  }
  return 0;
}
