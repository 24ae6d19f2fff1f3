// Tool calls on /v1/chat/completions: how a model family writes a call (its chat template says
// which), the grammar that makes decoding write exactly a valid call of the offered tools
// (tool_choice "required" or a named function), and the parser that turns the generated text
// back into OpenAI's message.tool_calls.
//
// The families (the call text each template renders for an assistant turn with tool_calls,
// which is what its models were trained to write):
//   Hermes (Hermes 2/3, Qwen 2.5/3, and the default for every other template, ChatML included):
//     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   one or more, "\n" between,
//     after optional content
//   Llama 3 (Llama 3.1+'s JSON tool calling, a template that says "ipython"/<|python_tag|>):
//     {"name": "f", "parameters": {...}}                              one call, the whole output
//   Mistral (a template that renders [TOOL_CALLS]):
//     [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]            a list, after optional content
// <|python_tag|> and [TOOL_CALLS] are control tokens in those vocabularies: the engine never
// puts them in the text and a grammar cannot emit them, so the grammars start after them and
// the parser takes the output with or without them. For the same reason (a vocabulary where
// <tool_call> is a control token drops it from the text) a Hermes output that is nothing but a
// call object is a call too. Each parser accepts "arguments" or "parameters" for the arguments.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lumen::server {

using Json = nlohmann::ordered_json;  // as openai_request.h (which includes this header)

enum class ToolCallFormat { Hermes, Llama3, Mistral };

const char* tool_call_format_name(ToolCallFormat f);

// The family of a chat template's source: [TOOL_CALLS] -> Mistral; <tool_call> -> Hermes;
// <|python_tag|> or ipython -> Llama 3; anything else (ChatML, no tool syntax) -> Hermes.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// One offered function: its name and the JSON schema of its arguments (an object schema;
// a function without `parameters` takes none: {"type": "object", "additionalProperties": false}).
struct ToolSpec {
  std::string name;
  Json parameters;
};

// tool_choice: "none" (tools are rendered into the prompt, but the output is plain content),
// "auto" (the model decides; calls in the output are parsed), "required" (at least one call),
// or {"type": "function", "function": {"name": N}} (exactly one call of N).
enum class ToolChoiceMode { None, Auto, Required, Named };

struct ToolRequest {
  std::vector<ToolSpec> tools;     // empty: no tools offered
  ToolChoiceMode choice = ToolChoiceMode::Auto;
  std::string named;               // ToolChoiceMode::Named: the function
  // parallel_tool_calls: whether the constraining grammar allows more than one call. Off unless
  // the request says true (OpenAI's default is true; llama.cpp's server defaults to false too):
  // a model that never ends its turn would keep adding calls until the token budget cuts one
  // in half, and the engine closes a sentence before the budget only when it is unfinished.
  // Parsing takes every call the output holds either way.
  bool parallel = false;
  bool constrained() const { return !tools.empty() && (choice == ToolChoiceMode::Required || choice == ToolChoiceMode::Named); }
  bool parses() const { return !tools.empty() && choice != ToolChoiceMode::None; }
};

// The grammar (text form, root rule `root`) whose sentences are exactly the valid call outputs
// for a constrained request: the family's call text around, per tool, an object with that
// tool's name and arguments following its parameters schema (json_schema_to_grammar, rules
// renamed per tool). "required": one call, or one or more with `parallel` (always one for
// Llama 3, whose template renders a single call); named: one call of that function.
// A schema the converter refuses throws its JsonSchemaError; `failed_tool` (if given) is set
// to the index of the tool whose schema it was.
std::string tool_call_grammar(ToolCallFormat format, const ToolRequest& request, size_t* failed_tool = nullptr);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text (compact), as OpenAI's function.arguments
};

// What a generated text says: calls (empty: it is plain content), and the content beside them
// (the text before the first call and any text after the last, right-trimmed; empty: none).
struct ParsedToolOutput {
  std::string content;
  std::vector<ToolCall> calls;
};

// Parses `text` in the family's format. Only calls of the offered `names`, with an object for
// arguments, count; an output in which any call fails to parse is plain content as a whole
// (content == text, no calls), never half of it.
ParsedToolOutput parse_tool_calls(ToolCallFormat format, std::string_view text, const std::vector<std::string>& names);

// Streaming: the generated text, split as it grows into what is surely content (streamed at
// once) and what may be a call (held back from where a call could begin: the family's marker
// or, at the very start, a call object's '{' or Mistral's '['; trailing whitespace too, since
// the complete content is right-trimmed). finish() parses the whole text.
class ToolCallSplitter {
 public:
  ToolCallSplitter(ToolCallFormat format, std::vector<std::string> names) : format_(format), names_(std::move(names)) {}
  // Appends generated text; returns the newly released content (possibly empty).
  std::string push(std::string_view text);
  // The end of the output: the parse of the whole text, and in `rest` the content not yet
  // released (what push() released is a prefix of result.content).
  ParsedToolOutput finish(std::string& rest) const;

 private:
  ToolCallFormat format_;
  std::vector<std::string> names_;
  std::string text_;
  size_t released_ = 0;
  bool holding_ = false;  // a call may have begun: nothing more is released until finish()
};

// A fresh id for a call: "call_" and 24 random letters and digits; Mistral's template demands
// exactly 9 letters and digits (it refuses other ids when the conversation comes back).
std::string new_tool_call_id(ToolCallFormat format);

}  // namespace lumen::server
