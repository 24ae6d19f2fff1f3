#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <random>

#include "grammar/grammar.h"
#include "grammar/grammar_compose.h"
#include "grammar/json_schema.h"

namespace lumen::server {

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view rtrim(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}
std::string_view trim(std::string_view s) { return rtrim(ltrim(s)); }

// The marker a family writes before its calls anywhere in the output ("" for Llama 3, whose
// call is the whole output).
std::string_view marker_of(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes: return kHermesOpen;
    case ToolCallFormat::Mistral: return kMistralMarker;
    case ToolCallFormat::Llama3: return {};
  }
  return {};
}

// The first character of a call written without its marker at the start of the output.
char bare_start_of(ToolCallFormat f) { return f == ToolCallFormat::Mistral ? '[' : '{'; }

// The length of the JSON object or array at the start of `s` (brackets matched outside
// strings), or npos when it does not close.
size_t json_value_length(std::string_view s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); i++) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// A call object {"name": N, "arguments" | "parameters": {...} or its JSON text} of an offered
// function; other members (Mistral's "id", a "type") are ignored.
std::optional<ToolCall> call_from_json(const Json& j, const std::vector<std::string>& names) {
  if (!j.is_object()) return std::nullopt;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  if (std::find(names.begin(), names.end(), call.name) == names.end()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  Json value = Json::object();  // a function without parameters may be called without them
  if (args != j.end()) {
    value = *args;
    if (value.is_string()) value = Json::parse(value.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!value.is_object()) return std::nullopt;
  }
  call.arguments = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  return call;
}

std::optional<ToolCall> call_from_text(std::string_view text, const std::vector<std::string>& names) {
  const Json j = Json::parse(trim(text), nullptr, /*allow_exceptions=*/false);
  return call_from_json(j, names);
}

void append_content(std::string& content, std::string_view more) {
  more = trim(more);
  if (more.empty()) return;
  if (!content.empty()) content += '\n';
  content += more;
}

ParsedToolOutput plain(std::string_view text) { return ParsedToolOutput{std::string(text), {}}; }

ParsedToolOutput parse_hermes(std::string_view text, const std::vector<std::string>& names) {
  size_t pos = text.find(kHermesOpen);
  if (pos == std::string_view::npos) {
    // No marker: a call object alone is a call (the marker may be a control token).
    const std::string_view t = trim(text);
    if (t.empty() || t.front() != '{') return plain(text);
    auto call = call_from_text(t, names);
    if (!call) return plain(text);
    return ParsedToolOutput{{}, {std::move(*call)}};
  }
  ParsedToolOutput out;
  out.content = std::string(rtrim(text.substr(0, pos)));
  while (pos != std::string_view::npos) {
    pos += kHermesOpen.size();
    const size_t close = text.find(kHermesClose, pos);
    const size_t body_end = close == std::string_view::npos ? text.size() : close;
    // The object ends before the close tag or, when the tag is missing, where its braces close.
    std::string_view body = ltrim(text.substr(pos, body_end - pos));
    const size_t len = json_value_length(body);
    if (len == std::string_view::npos) return plain(text);
    auto call = call_from_text(body.substr(0, len), names);
    if (!call) return plain(text);
    out.calls.push_back(std::move(*call));
    const std::string_view after_object = body.substr(len);
    size_t next = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
    if (close == std::string_view::npos) {
      // The close tag may be missing (a control token, or the budget ran out inside it).
      const std::string_view tail = trim(after_object);
      if (tail.size() >= kHermesClose.size() || kHermesClose.substr(0, tail.size()) != tail) append_content(out.content, tail);
    }
    else if (!trim(after_object).empty()) return plain(text);  // text inside the tags beside the object
    pos = text.find(kHermesOpen, next);
    append_content(out.content, text.substr(next, (pos == std::string_view::npos ? text.size() : pos) - next));
  }
  return out;
}

// Llama 3 (an object) and Mistral (a list of objects): the value at the start of `body`,
// after `content`, and whatever follows it as more content.
ParsedToolOutput parse_value(std::string_view text, std::string content, std::string_view body, const std::vector<std::string>& names) {
  body = ltrim(body);
  const size_t len = json_value_length(body);
  if (len == std::string_view::npos) return plain(text);
  const Json j = Json::parse(body.substr(0, len), nullptr, /*allow_exceptions=*/false);
  ParsedToolOutput out;
  out.content = std::move(content);
  if (j.is_array()) {
    if (j.empty()) return plain(text);
    for (const Json& c : j) {
      auto call = call_from_json(c, names);
      if (!call) return plain(text);
      out.calls.push_back(std::move(*call));
    }
  } else {
    auto call = call_from_json(j, names);
    if (!call) return plain(text);
    out.calls.push_back(std::move(*call));
  }
  append_content(out.content, body.substr(len));
  return out;
}

std::string call_object(const std::string& name, const char* args_key, const std::string& args_rule, bool mistral_id) {
  std::string s = grammar_literal(fmt::format("{{\"name\": \"{}\", \"{}\": ", name, args_key)) + " " + args_rule;
  // Mistral's template renders each call with the id after its arguments; its models write one.
  if (mistral_id) s += " (" + grammar_literal(", \"id\": \"") + " [a-zA-Z0-9]{9} " + grammar_literal("\"") + ")?";
  return s + " " + grammar_literal("}");
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Llama3: return "llama3-json";
    case ToolCallFormat::Mistral: return "mistral";
  }
  return "?";
}

ToolCallFormat detect_tool_call_format(std::string_view src) {
  if (src.find(kMistralMarker) != std::string_view::npos) return ToolCallFormat::Mistral;
  if (src.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::Hermes;
  if (src.find(kPythonTag) != std::string_view::npos || src.find("ipython") != std::string_view::npos) return ToolCallFormat::Llama3;
  return ToolCallFormat::Hermes;
}

std::string tool_call_grammar(ToolCallFormat format, const ToolRequest& request, size_t* failed_tool) {
  const char* args_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  std::string rules, alternatives;
  for (size_t k = 0; k < request.tools.size(); k++) {
    const ToolSpec& tool = request.tools[k];
    if (request.choice == ToolChoiceMode::Named && tool.name != request.named) continue;
    std::string sub;
    try {
      sub = json_schema_to_grammar(tool.parameters);
    } catch (const GrammarError&) {  // JsonSchemaError, or a limit of the converter
      if (failed_tool) *failed_tool = k;
      throw;
    }
    const std::string prefix = fmt::format("t{}-", k);
    rules += prefix_grammar_rules(sub, prefix);
    rules += '\n';
    if (!alternatives.empty()) alternatives += "\n  | ";
    alternatives += call_object(tool.name, args_key, prefix + "root", format == ToolCallFormat::Mistral);
  }
  if (alternatives.empty()) throw GrammarError(fmt::format("tool_choice names '{}', which is not among the tools", request.named));
  const bool many = request.choice == ToolChoiceMode::Required && request.parallel && format != ToolCallFormat::Llama3;
  std::string head;
  switch (format) {
    case ToolCallFormat::Hermes:
      head = "root ::= tc-wrapped" + std::string(many ? " (" + grammar_literal("\n") + " tc-wrapped)*" : "") + "\n";
      head += "tc-wrapped ::= " + grammar_literal("<tool_call>\n") + " tc-call " + grammar_literal("\n</tool_call>") + "\n";
      break;
    case ToolCallFormat::Llama3:
      head = "root ::= tc-call\n";
      break;
    case ToolCallFormat::Mistral:
      head = "root ::= " + grammar_literal("[") + " tc-call" + std::string(many ? " (" + grammar_literal(", ") + " tc-call)*" : "") +
             " " + grammar_literal("]") + "\n";
      break;
  }
  return head + "tc-call ::= " + alternatives + "\n" + rules;
}

ParsedToolOutput parse_tool_calls(ToolCallFormat format, std::string_view text, const std::vector<std::string>& names) {
  switch (format) {
    case ToolCallFormat::Hermes: return parse_hermes(text, names);
    case ToolCallFormat::Llama3: {
      std::string_view body = ltrim(text);
      if (body.substr(0, kPythonTag.size()) == kPythonTag) body.remove_prefix(kPythonTag.size());
      if (ltrim(body).substr(0, 1) != "{") return plain(text);
      return parse_value(text, {}, body, names);
    }
    case ToolCallFormat::Mistral: {
      const size_t m = text.find(kMistralMarker);
      if (m != std::string_view::npos)
        return parse_value(text, std::string(rtrim(text.substr(0, m))), text.substr(m + kMistralMarker.size()), names);
      if (ltrim(text).substr(0, 1) != "[") return plain(text);
      return parse_value(text, {}, text, names);
    }
  }
  return plain(text);
}

std::string ToolCallSplitter::push(std::string_view more) {
  text_ += more;
  if (holding_) return {};
  const std::string_view all = text_;
  const std::string_view head = ltrim(all);
  if (released_ == 0 && !head.empty() && head.front() == bare_start_of(format_)) {
    holding_ = true;  // a call written without its marker, from the very start
    return {};
  }
  if (released_ == 0 && format_ == ToolCallFormat::Llama3) {
    // Llama 3 writes <|python_tag|> only at the very start: hold while the output may still be
    // it, and hold everything once it is (the parse decides whether a call follows).
    const size_t n = std::min(head.size(), kPythonTag.size());
    if (head.substr(0, n) == kPythonTag.substr(0, n)) {
      holding_ = head.size() >= kPythonTag.size();
      return {};
    }
  }
  size_t end = all.size();
  const std::string_view marker = marker_of(format_);
  if (!marker.empty()) {
    const size_t found = all.find(marker, released_);
    if (found != std::string_view::npos) {
      holding_ = true;
      end = found;
    } else {
      // Hold back a tail that may be the marker's beginning.
      for (size_t k = std::min(marker.size() - 1, all.size()); k > 0; k--)
        if (all.substr(all.size() - k) == marker.substr(0, k)) {
          end = all.size() - k;
          break;
        }
    }
  }
  end = rtrim(all.substr(0, end)).size();  // whitespace goes out only once text follows it
  if (end <= released_) return {};
  std::string out(all.substr(released_, end - released_));
  released_ = end;
  return out;
}

ParsedToolOutput ToolCallSplitter::finish(std::string& rest) const {
  ParsedToolOutput r = parse_tool_calls(format_, text_, names_);
  // What was released is a prefix of the content either way (text before any call, trimmed).
  rest = r.content.size() > released_ ? r.content.substr(released_) : std::string();
  return r;
}

std::string new_tool_call_id(ToolCallFormat format) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlnum) - 2);
  const bool mistral = format == ToolCallFormat::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); i++) id += kAlnum[pick(rng)];
  return id;
}

}  // namespace lumen::server
