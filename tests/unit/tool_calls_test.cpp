// Tool calls (server/tool_calls.h): each shared template's family; the parser on what the
// templates themselves render for an assistant's call and on malformed outputs of each family;
// the constraining grammar accepts exactly valid calls; streaming holds back only what may be
// a call.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "server/tool_calls.h"
#include "template/chat_template.h"
#include "test_support.h"

namespace lumen::server {
namespace {

const std::vector<std::string> kNames = {"get_weather", "add"};

ToolRequest weather_tools(ToolChoiceMode choice = ToolChoiceMode::Required, std::string named = {}, bool parallel = true) {
  // (parallel_tool_calls true, as requests must say for more than one call)
  ToolRequest r;
  r.tools.push_back({"get_weather", Json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":20},)"
                                                R"("unit":{"enum":["c","f"]}},"required":["city"],"additionalProperties":false})")});
  r.tools.push_back({"add", Json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},)"
                                        R"("required":["a","b"],"additionalProperties":false})")});
  r.choice = choice;
  r.named = std::move(named);
  r.parallel = parallel;
  return r;
}

bool accepts(ToolCallFormat f, const ToolRequest& r, std::string_view text) {
  return grammar_accepts(compile_grammar(tool_call_grammar(f, r)), text);
}

TEST(ToolCalls, DetectsTheSharedTemplatesFamilies) {
  const std::pair<const char*, ToolCallFormat> cases[] = {
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::Hermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::Hermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::Hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::Llama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::Mistral},
      // No tool-call syntax of a known family: the default.
      {"google-gemma-2-2b-it.jinja", ToolCallFormat::Hermes},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolCallFormat::Hermes},
      {"HuggingFaceTB-SmolLM3-3B.jinja", ToolCallFormat::Hermes},
  };
  for (const auto& [file, want] : cases) {
    const std::string rel = std::string("chat-templates/") + file;
    if (!test::shared_exists(rel)) GTEST_SKIP() << "shared data missing: " << rel;
    EXPECT_EQ(detect_tool_call_format(test::read_file(test::shared_path(rel))), want) << file;
  }
  EXPECT_EQ(detect_tool_call_format("{{- '<|im_start|>' + message['role'] }}"), ToolCallFormat::Hermes);  // ChatML
}

// What a template renders for an assistant turn holding one call: the rendering of the
// conversation with that turn, less the rendering without it (with the generation prompt),
// up to the end-of-turn text.
std::string rendered_call(const std::string& file, const std::string& end_of_turn) {
  const JinjaTemplate tpl(test::read_file(test::shared_path("chat-templates/" + file)));
  Json tools = Json::array({Json::parse(R"({"type":"function","function":{"name":"get_weather","description":"Weather.",)"
                                        R"("parameters":{"type":"object","properties":{"city":{"type":"string","description":"A city."}},"required":["city"]}}})")});
  Json messages = Json::array({Json{{"role", "user"}, {"content", "Weather in Paris?"}}});
  Json vars{{"tools", tools}, {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", true}, {"messages", messages}};
  const std::string before = tpl.render(vars);
  messages.push_back(Json::parse(R"({"role":"assistant","content":"","tool_calls":[{"id":"abcDEF123","type":"function",)"
                                 R"("function":{"name":"get_weather","arguments":{"city":"Paris"}}}]})"));
  vars["messages"] = messages;
  vars["add_generation_prompt"] = false;
  const std::string after = tpl.render(vars);
  EXPECT_EQ(after.substr(0, before.size()), before) << file;
  std::string call = after.substr(before.size());
  const size_t end = call.rfind(end_of_turn);
  EXPECT_NE(end, std::string::npos) << file << ": " << call;
  return call.substr(0, end);
}

TEST(ToolCalls, ParsesAndAcceptsWhatEachTemplateRenders) {
  struct Case {
    const char* file;
    const char* end_of_turn;
    ToolCallFormat format;
  };
  const Case cases[] = {
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|im_end|>", ToolCallFormat::Hermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_end|>", ToolCallFormat::Hermes},
      {"Qwen-Qwen3-0.6B.jinja", "<|im_end|>", ToolCallFormat::Hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|eot_id|>", ToolCallFormat::Llama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "</s>", ToolCallFormat::Mistral},
  };
  ToolRequest req;
  req.tools.push_back({"get_weather", Json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})")});
  req.choice = ToolChoiceMode::Required;
  for (const Case& c : cases) {
    if (!test::shared_exists(std::string("chat-templates/") + c.file)) GTEST_SKIP() << "shared data missing";
    std::string text = rendered_call(c.file, c.end_of_turn);
    // Qwen 3 puts an empty think block before the call of a turn it renders last.
    const size_t think = text.find("</think>");
    const ParsedToolOutput p = parse_tool_calls(c.format, text, {"get_weather"});
    ASSERT_EQ(p.calls.size(), 1u) << c.file << ": " << text;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(Json::parse(p.calls[0].arguments), Json::parse(R"({"city":"Paris"})"));
    if (think == std::string::npos) {
      EXPECT_EQ(p.content, "") << c.file;
    }
    // The grammar's calls are the template's text (less its control tokens and its turn's head).
    if (think != std::string::npos) text = text.substr(think + 8);
    const size_t lead = text.find_first_not_of('\n');
    text = text.substr(lead);
    if (c.format == ToolCallFormat::Mistral) text = text.substr(std::string("[TOOL_CALLS]").size());
    EXPECT_TRUE(accepts(c.format, req, text)) << c.file << ": " << text;
  }
}

TEST(ToolCalls, HermesParser) {
  const auto f = ToolCallFormat::Hermes;
  auto p = parse_tool_calls(f, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "add");
  EXPECT_EQ(p.calls[0].arguments, R"({"a":1,"b":2})");
  EXPECT_EQ(p.content, "");
  // Several calls, content before them, arguments as a JSON string, a missing last close tag.
  p = parse_tool_calls(f,
                       "Let me look.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n"
                       "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"parameters\": {\"a\": 3, \"b\": 4}}",
                       kNames);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.content, "Let me look.");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(p.calls[1].arguments, R"({"a":3,"b":4})");
  // A close tag cut short by the token budget is no content.
  p = parse_tool_calls(f, "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_c", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "");
  // A bare call object (a vocabulary where <tool_call> is a control token drops it).
  p = parse_tool_calls(f, " {\"name\": \"add\", \"arguments\": {}} ", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  // Malformed: each stays plain content, whole.
  for (const char* bad : {
           "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1,\n</tool_call>",   // broken JSON
           "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",          // not offered
           "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                              // no name
           "<tool_call>\n{\"name\": \"add\", \"arguments\": [1]}\n</tool_call>",          // arguments not an object
           "<tool_call>\n{\"name\": \"add\", \"arguments\": {}} trailing\n</tool_call>",  // text beside the object
           "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call><tool_call>\n{\"name\": \"add\"",  // 2nd truncated
           "<tool_call>",
           "Just some text about {braces}.",
           "{\"name\": \"add\", \"arguments\": {}} and more",
       }) {
    p = parse_tool_calls(f, bad, kNames);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
  }
}

TEST(ToolCalls, Llama3Parser) {
  const auto f = ToolCallFormat::Llama3;
  auto p = parse_tool_calls(f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Rome"})");
  p = parse_tool_calls(f, "<|python_tag|>{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "add");
  for (const char* bad : {"Sure: {\"name\": \"add\", \"parameters\": {}}", "{\"name\": \"add\", \"parameters\": {", "{\"city\": \"Rome\"}",
                          "[{\"name\": \"add\", \"parameters\": {}}]"}) {
    p = parse_tool_calls(f, bad, kNames);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
  }
}

TEST(ToolCalls, MistralParser) {
  const auto f = ToolCallFormat::Mistral;
  auto p = parse_tool_calls(f, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, \"id\": \"abcDEF123\"}, "
                               "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]", kNames);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].name, "get_weather");
  // Without the marker (a control token, so not in the text), and with content before a marker.
  p = parse_tool_calls(f, "[{\"name\": \"add\", \"arguments\": {}}]", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  p = parse_tool_calls(f, "Checking.[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}]", kNames);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "Checking.");
  for (const char* bad : {"[TOOL_CALLS][]", "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}", "[1, 2]",
                          "[TOOL_CALLS]{\"name\": \"zz\", \"arguments\": {}}", "plain text"}) {
    p = parse_tool_calls(f, bad, kNames);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
  }
}

TEST(ToolCalls, GrammarAcceptsExactlyValidCalls) {
  const std::string w = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
  const std::string a = R"({"name": "add", "arguments": {"a": 1, "b": -2}})";
  const auto H = ToolCallFormat::Hermes;
  const ToolRequest req = weather_tools();
  EXPECT_TRUE(accepts(H, req, "<tool_call>\n" + w + "\n</tool_call>"));
  EXPECT_TRUE(accepts(H, req, "<tool_call>\n" + w + "\n</tool_call>\n<tool_call>\n" + a + "\n</tool_call>"));
  EXPECT_TRUE(accepts(H, req, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>"));
  for (const std::string& bad : std::vector<std::string>{
           std::string(""),                                                                                       // no call
           "<tool_call>\n" + w,                                                                                   // unclosed
           "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",                                  // not offered
           "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>",                           // b required
           "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>",               // not an integer
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"x\": 1}}\n</tool_call>",  // no extras
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"k\"}}\n</tool_call>",
           "Sure. <tool_call>\n" + a + "\n</tool_call>",                                                   // no content
       })
    EXPECT_FALSE(accepts(H, req, bad)) << bad;
  // A named function: exactly one call of it.
  const ToolRequest named = weather_tools(ToolChoiceMode::Named, "add");
  EXPECT_TRUE(accepts(H, named, "<tool_call>\n" + a + "\n</tool_call>"));
  EXPECT_FALSE(accepts(H, named, "<tool_call>\n" + w + "\n</tool_call>"));
  EXPECT_FALSE(accepts(H, named, "<tool_call>\n" + a + "\n</tool_call>\n<tool_call>\n" + a + "\n</tool_call>"));
  // parallel_tool_calls false (the default): one call.
  EXPECT_FALSE(accepts(H, weather_tools(ToolChoiceMode::Required, {}, false),
                       "<tool_call>\n" + w + "\n</tool_call>\n<tool_call>\n" + a + "\n</tool_call>"));

  // Llama 3: the object alone, "parameters", one call.
  const auto L = ToolCallFormat::Llama3;
  EXPECT_TRUE(accepts(L, req, R"({"name": "add", "parameters": {"a": 1, "b": 2}})"));
  EXPECT_FALSE(accepts(L, req, a));
  EXPECT_FALSE(accepts(L, req, R"({"name": "add", "parameters": {"a": 1, "b": 2}}{"name": "add", "parameters": {"a": 1, "b": 2}})"));
  // Mistral: a list, the optional id of its template.
  const auto M = ToolCallFormat::Mistral;
  EXPECT_TRUE(accepts(M, req, "[" + w + ", " + a + "]"));
  EXPECT_TRUE(accepts(M, req, R"([{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "abcDEF123"}])"));
  EXPECT_FALSE(accepts(M, req, R"([{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "short"}])"));
  EXPECT_FALSE(accepts(M, req, "[]"));
  EXPECT_FALSE(accepts(M, weather_tools(ToolChoiceMode::Named, "get_weather"), "[" + w + ", " + w + "]"));
}

TEST(ToolCalls, GrammarRefusesABadSchemaNamingTheTool) {
  ToolRequest req = weather_tools();
  req.tools[1].parameters = Json::parse(R"({"type":"object","properties":{"a":{"type":"integer","multipleOf":2}}})");
  size_t failed = 99;
  EXPECT_THROW(tool_call_grammar(ToolCallFormat::Hermes, req, &failed), GrammarError);
  EXPECT_EQ(failed, 1u);
}

TEST(ToolCalls, SplitterHoldsBackOnlyWhatMayBeACall) {
  const auto run = [](ToolCallFormat f, const std::string& text, std::string& released) {
    ToolCallSplitter s(f, kNames);
    released.clear();
    for (const char c : text) released += s.push(std::string(1, c));  // a character at a time
    std::string rest;
    ParsedToolOutput p = s.finish(rest);
    const ParsedToolOutput whole = parse_tool_calls(f, text, kNames);
    EXPECT_EQ(p.calls.size(), whole.calls.size()) << text;
    EXPECT_EQ(released + rest, whole.calls.empty() ? text : whole.content) << text;
    return p;
  };
  std::string released;
  // Content before a call goes out (less its trailing whitespace); the call never does.
  auto p = run(ToolCallFormat::Hermes, "Let me check.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>", released);
  EXPECT_EQ(released, "Let me check.");
  EXPECT_EQ(p.calls.size(), 1u);
  // A bare object at the start is held from its first brace.
  run(ToolCallFormat::Hermes, "  {\"name\": \"add\", \"arguments\": {}}", released);
  EXPECT_EQ(released, "");
  // Plain text: released as it comes, except a tail that may begin the marker.
  ToolCallSplitter s(ToolCallFormat::Hermes, kNames);
  EXPECT_EQ(s.push("a <"), "a");
  EXPECT_EQ(s.push("tool"), "");
  EXPECT_EQ(s.push("box>"), " <toolbox>");
  run(ToolCallFormat::Hermes, "Once upon a time <b>there</b> was {a} dog.\n", released);
  EXPECT_EQ(released, "Once upon a time <b>there</b> was {a} dog.");
  // A call that fails to parse comes out as content at the end.
  run(ToolCallFormat::Hermes, "Hi <tool_call>\n{\"name\": \"add\", \"argu", released);
  EXPECT_EQ(released, "Hi");
  run(ToolCallFormat::Mistral, "[{\"name\": \"add\", \"arguments\": {}}]", released);
  EXPECT_EQ(released, "");
  run(ToolCallFormat::Mistral, "Ok.[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}]", released);
  EXPECT_EQ(released, "Ok.");
  run(ToolCallFormat::Llama3, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", released);
  EXPECT_EQ(released, "");
  run(ToolCallFormat::Llama3, "Not a call {x}", released);
  EXPECT_EQ(released, "Not a call {x}");
  // <|python_tag|> opens a call only at the start; the text after the call is content at the
  // end, like the whole parse's (found by fuzz_tool_calls).
  run(ToolCallFormat::Llama3, "<|python_tag|>{\"name\": \"add\", \"parameters\": {}}\x1a", released);
  EXPECT_EQ(released, "");
  run(ToolCallFormat::Llama3, "<|python_tag|> no call", released);
  EXPECT_EQ(released, "");
  run(ToolCallFormat::Llama3, "<|pyth> text", released);
  EXPECT_EQ(released, "<|pyth> text");
}

TEST(ToolCalls, Ids) {
  const std::string a = new_tool_call_id(ToolCallFormat::Hermes), b = new_tool_call_id(ToolCallFormat::Hermes);
  EXPECT_EQ(a.substr(0, 5), "call_");
  EXPECT_EQ(a.size(), 29u);
  EXPECT_NE(a, b);
  const std::string m = new_tool_call_id(ToolCallFormat::Mistral);
  EXPECT_EQ(m.size(), 9u);  // the Mistral template refuses any other length
  for (const char c : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)));
}

}  // namespace
}  // namespace lumen::server
