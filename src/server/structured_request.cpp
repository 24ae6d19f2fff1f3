#include "server/structured_request.h"

#include <set>

#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/grammar_cache.h"

namespace lumen::server {

namespace {

constexpr size_t kMaxTools = 128;

const Json* member(const Json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// OpenAI's rule for function and schema names.
bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

void check_string(const Json& obj, const char* key, const std::string& where) {
  if (const Json* v = member(obj, key); v && !v->is_string()) bad_request(where, "'{}' must be a string", where);
}

void check_bool(const Json& obj, const char* key, const std::string& where) {
  if (const Json* v = member(obj, key); v && !v->is_boolean()) bad_request(where, "'{}' must be a boolean", where);
}

OutputConstraint parse_response_format(const Json& rf) {
  OutputConstraint c;
  if (!rf.is_object()) bad_request("response_format", "'response_format' must be an object with a 'type'");
  const Json* type = member(rf, "type");
  if (!type || !type->is_string())
    bad_request("response_format.type", "'response_format.type' must be one of 'text', 'json_object', 'json_schema'");
  const std::string t = type->get<std::string>();
  if (t == "text") return c;
  if (t == "json_object") {
    c.kind = OutputConstraint::Kind::JsonObject;
    return c;
  }
  if (t != "json_schema")
    bad_request("response_format.type", "response_format type '{}' is not supported (expected 'text', 'json_object' or 'json_schema')", t);
  const Json* js = member(rf, "json_schema");
  if (!js || !js->is_object())
    bad_request("response_format.json_schema", "response_format type 'json_schema' needs a 'json_schema' object holding the 'schema'");
  if (const Json* name = member(*js, "name")) {
    if (!name->is_string() || !valid_name(name->get<std::string>()))
      bad_request("response_format.json_schema.name", "'response_format.json_schema.name' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
  }
  check_string(*js, "description", "response_format.json_schema.description");
  // strict: OpenAI's opt-in to exact adherence; lumen always decodes under the schema's grammar.
  check_bool(*js, "strict", "response_format.json_schema.strict");
  const Json* schema = member(*js, "schema");
  if (!schema) bad_request("response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
  if (!schema->is_object()) bad_request("response_format.json_schema.schema", "'response_format.json_schema.schema' must be a JSON schema object");
  c.kind = OutputConstraint::Kind::JsonSchema;
  c.schema = *schema;
  return c;
}

ToolSpec parse_tool(const Json& t, size_t i) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!t.is_object()) bad_request(where, "'{}' must be an object", where);
  const Json* type = member(t, "type");
  if (!type || *type != "function") bad_request(where + ".type", "'{}.type' must be 'function'", where);
  const Json* fn = member(t, "function");
  if (!fn || !fn->is_object()) bad_request(where + ".function", "'{}.function' must be an object", where);
  const Json* name = member(*fn, "name");
  if (!name || !name->is_string() || !valid_name(name->get<std::string>()))
    bad_request(where + ".function.name", "'{}.function.name' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -", where);
  check_string(*fn, "description", where + ".function.description");
  check_bool(*fn, "strict", where + ".function.strict");
  ToolSpec spec;
  spec.name = name->get<std::string>();
  // No parameters: the function takes none (OpenAI's "empty parameter list").
  spec.parameters = Json{{"type", "object"}, {"additionalProperties", false}};
  if (const Json* p = member(*fn, "parameters")) {
    const std::string pw = where + ".function.parameters";
    if (!p->is_object()) bad_request(pw, "'{}' must be a JSON schema object", pw);
    // Arguments are an object: a schema of another type could never be called.
    if (const Json* pt = member(*p, "type"); pt && *pt != "object")
      bad_request(pw, "'{}' must describe an object (type 'object'): a call's arguments are an object", pw);
    spec.parameters = *p;
  }
  return spec;
}

}  // namespace

OutputConstraint parse_output_constraint(const Json& body) {
  OutputConstraint c;
  if (const Json* rf = member(body, "response_format")) c = parse_response_format(*rf);
  if (const Json* g = member(body, "grammar")) {
    if (!g->is_string()) bad_request("grammar", "'grammar' must be a string (the grammar's text form)");
    if (c.kind != OutputConstraint::Kind::None)
      bad_request("grammar", "'grammar' and a JSON 'response_format' both constrain the output: give one");
    c.kind = OutputConstraint::Kind::Grammar;
    c.grammar = g->get<std::string>();
  }
  return c;
}

ToolRequest parse_tool_request(const Json& body, const OutputConstraint& constraint) {
  ToolRequest r;
  if (const Json* tools = member(body, "tools")) {
    if (!tools->is_array()) bad_request("tools", "'tools' must be a list");
    // OpenAI's bound; each tool is a grammar of its own when calls are constrained.
    if (tools->size() > kMaxTools) bad_request("tools", "'tools' may hold at most {} functions, got {}", kMaxTools, tools->size());
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); i++) {
      ToolSpec spec = parse_tool((*tools)[i], i);
      if (!names.insert(spec.name).second)
        bad_request(fmt::format("tools[{}].function.name", i), "the function name '{}' is offered twice", spec.name);
      r.tools.push_back(std::move(spec));
    }
  }
  if (const Json* p = member(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) bad_request("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r.parallel = p->get<bool>();
  }
  r.choice = ToolChoiceMode::Auto;
  if (const Json* tc = member(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "none") r.choice = ToolChoiceMode::None;
      else if (s == "auto") r.choice = ToolChoiceMode::Auto;
      else if (s == "required") r.choice = ToolChoiceMode::Required;
      else bad_request("tool_choice", "tool_choice '{}' is not supported (expected 'none', 'auto', 'required' or a function)", s);
    } else if (tc->is_object()) {
      const Json* type = member(*tc, "type");
      if (!type || *type != "function") bad_request("tool_choice.type", "'tool_choice.type' must be 'function'");
      const Json* fn = member(*tc, "function");
      const Json* name = fn && fn->is_object() ? member(*fn, "name") : nullptr;
      if (!name || !name->is_string()) bad_request("tool_choice.function.name", "'tool_choice.function.name' must be a string");
      r.choice = ToolChoiceMode::Named;
      r.named = name->get<std::string>();
      bool offered = false;
      for (const ToolSpec& t : r.tools) offered = offered || t.name == r.named;
      if (!offered) bad_request("tool_choice.function.name", "tool_choice names the function '{}', which 'tools' does not offer", r.named);
    } else {
      bad_request("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
    }
    if (r.choice == ToolChoiceMode::Required && r.tools.empty())
      bad_request("tool_choice", "tool_choice 'required' needs 'tools'");
  }
  if (r.constrained() && constraint.kind != OutputConstraint::Kind::None)
    bad_request("tool_choice", "tool_choice '{}' constrains the output to tool calls, and so does '{}': give one",
                r.choice == ToolChoiceMode::Named ? r.named : "required",
                constraint.kind == OutputConstraint::Kind::Grammar ? "grammar" : "response_format");
  return r;
}

std::shared_ptr<const Grammar> resolve_output_grammar(const OutputConstraint& c, const ToolRequest& tools, ToolCallFormat format,
                                                      GrammarCache& cache) {
  std::string text, param;
  try {
    switch (c.kind) {
      case OutputConstraint::Kind::None:
        if (!tools.constrained()) return nullptr;
        param = "tools";
        {
          size_t failed = 0;
          try {
            text = tool_call_grammar(format, tools, &failed);
          } catch (const GrammarError&) {
            param = fmt::format("tools[{}].function.parameters", failed);
            throw;
          }
        }
        break;
      case OutputConstraint::Kind::Grammar:
        param = "grammar";
        text = c.grammar;
        break;
      case OutputConstraint::Kind::JsonObject:
        param = "response_format";
        text = json_object_grammar();
        break;
      case OutputConstraint::Kind::JsonSchema:
        param = "response_format.json_schema.schema";
        text = json_schema_to_grammar(c.schema);
        break;
    }
    return cache.get(text);
  } catch (const GrammarError& e) {  // JsonSchemaError too: its message names the keyword's path
    bad_request(param, "'{}' cannot be used: {}", param, e.what());
  }
}

}  // namespace lumen::server
