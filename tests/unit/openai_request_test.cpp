// The OpenAI request validation: what is accepted, the defaults, and that every fault is a
// 400 naming its field (never a crash, never a silent default for a wrong value).
#include <gtest/gtest.h>

#include "grammar/grammar_matcher.h"
#include "server/api_server.h"
#include "server/grammar_cache.h"
#include "server/openai_request.h"

namespace lumen::server {
namespace {

const ApiLimits kLimits;

GenerationRequest completion(const std::string& body) { return parse_completion_request(parse_json_body(body, kLimits), kLimits, 512); }
GenerationRequest chat(const std::string& body) { return parse_chat_request(parse_json_body(body, kLimits), kLimits, 512); }

// The ApiError a body raises: its status and param.
std::pair<int, std::string> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, "no error"};
}

TEST(OpenAiRequest, CompletionPromptShapes) {
  EXPECT_EQ(completion(R"({"prompt":"hi"})").prompts.size(), 1u);
  EXPECT_FALSE(completion(R"({"prompt":"hi"})").prompts[0].is_tokens);
  auto r = completion(R"({"prompt":["a","b","c"]})");
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[2].text, "c");
  r = completion(R"({"prompt":[1,2,3]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  r = completion(R"({"prompt":[[1,2],[3]]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{3}));
}

TEST(OpenAiRequest, OpenAiDefaults) {
  const auto r = completion(R"({"prompt":"hi","user":"u1","some_unknown_field":{"x":1}})");
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.params.sampling.top_p, 1.0f);
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.params.sampling.min_p, 0.0f);
  EXPECT_EQ(r.params.n, 1);
  EXPECT_FALSE(r.max_tokens_given);
  EXPECT_FALSE(r.seed_given);
  EXPECT_FALSE(r.stream);
}

TEST(OpenAiRequest, SamplingFields) {
  const auto r = completion(
      R"({"prompt":"hi","max_tokens":7,"temperature":0,"top_p":0.5,"top_k":-1,"min_p":0.1,"presence_penalty":1.5,)"
      R"("frequency_penalty":-0.5,"repetition_penalty":1.1,"seed":-3,"stop":"\n","n":3,"logprobs":2,)"
      R"("logit_bias":{"5":-100,"7":2},"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"echo":true})");
  EXPECT_EQ(r.params.sampling.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_TRUE(r.params.sampling.greedy());
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.params.sampling.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(r.params.sampling.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(r.params.n, 3);
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 2);
  ASSERT_EQ(r.params.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.params.sampling.logit_bias[0].token, 5);
  EXPECT_TRUE(r.params.ignore_eos && r.stream && r.include_usage && r.echo);
  EXPECT_EQ(completion(R"({"prompt":"x","max_completion_tokens":9,"max_tokens":3})").params.sampling.max_tokens, 9);
  EXPECT_EQ(completion(R"({"prompt":"x","max_tokens":16.0})").params.sampling.max_tokens, 16);
}

TEST(OpenAiRequest, FaultsAre400NamingTheField) {
  const std::pair<int, std::string> cases[] = {
      error_of([] { completion(R"({"prompt":"x","temperature":3})"); }),
      error_of([] { completion(R"({"prompt":"x","top_p":0})"); }),
      error_of([] { completion(R"({"prompt":"x","n":0})"); }),
      error_of([] { completion(R"({"prompt":"x","n":100})"); }),
      error_of([] { completion(R"({"prompt":"x","max_tokens":-1})"); }),
      error_of([] { completion(R"({"prompt":"x","max_tokens":"a"})"); }),
      error_of([] { completion(R"({"prompt":"x","max_tokens":1.5})"); }),
      error_of([] { completion(R"({"prompt":"x","logprobs":50})"); }),
      error_of([] { completion(R"({"prompt":"x","logit_bias":{"512":1}})"); }),
      error_of([] { completion(R"({"prompt":"x","logit_bias":{"abc":1}})"); }),
      error_of([] { completion(R"({"prompt":"x","logit_bias":{"3":1000}})"); }),
      error_of([] { completion(R"({"prompt":"x","stop":[""]})"); }),
      error_of([] { completion(R"({"prompt":"x","stop":[1]})"); }),
      error_of([] { completion(R"({"prompt":"x","stream":"yes"})"); }),
      error_of([] { completion(R"({"prompt":[1,2,512]})"); }),
      error_of([] { completion(R"({"prompt":[]})"); }),
      error_of([] { completion(R"({"prompt":5})"); }),
      error_of([] { completion(R"({})"); }),
  };
  const char* params[] = {"temperature", "top_p",      "n",          "n",      "max_tokens", "max_tokens",
                          "max_tokens",  "logprobs",   "logit_bias", "logit_bias", "logit_bias", "stop",
                          "stop",        "stream",     "prompt",     "prompt",     "prompt",     "prompt"};
  for (size_t i = 0; i < std::size(cases); i++) {
    EXPECT_EQ(cases[i].first, 400) << "case " << i;
    EXPECT_EQ(cases[i].second, params[i]) << "case " << i;
  }
}

TEST(OpenAiRequest, StopStringLimits) {
  std::string many = R"({"prompt":"x","stop":[)";
  for (int i = 0; i < 17; i++) many += std::string(i ? "," : "") + "\"s\"";
  many += "]}";
  EXPECT_EQ(error_of([&] { completion(many); }).first, 400);
  const std::string long_stop = R"({"prompt":"x","stop":")" + std::string(2000, 'a') + "\"}";
  EXPECT_EQ(error_of([&] { completion(long_stop); }).first, 400);
}

TEST(OpenAiRequest, BodiesThatAreNotJsonObjects) {
  EXPECT_EQ(error_of([] { parse_json_body("{\"prompt\":", kLimits); }).first, 400);
  EXPECT_EQ(error_of([] { parse_json_body("[1,2]", kLimits); }).first, 400);
  EXPECT_EQ(error_of([] { parse_json_body("{\"a\":\"\xff\xfe\"}", kLimits); }).first, 400);  // invalid UTF-8
  EXPECT_EQ(error_of([] { parse_json_body("{\"a\":1e999999}", kLimits); }).first, 400);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of([&] { parse_json_body("{\"a\":" + deep + "}", kLimits); }).first, 400);
  // Brackets inside strings do not count as nesting.
  EXPECT_NO_THROW(parse_json_body("{\"a\":\"" + std::string(1000, '[') + "\"}", kLimits));
}

TEST(OpenAiRequest, ChatMessages) {
  const auto r = chat(
      R"({"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]}],)"
      R"("logprobs":true,"top_logprobs":3,"add_generation_prompt":false,"chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "Hi there");
  EXPECT_EQ(r.messages[2]["content"], "");  // null beside tool_calls: templates concatenate it
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);  // parsed for the template
  EXPECT_TRUE(r.params.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 3);
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.tools.is_null());
}

TEST(OpenAiRequest, ChatFaults) {
  EXPECT_EQ(error_of([] { chat(R"({"messages":[]})"); }), (std::pair<int, std::string>{400, "messages"}));
  EXPECT_EQ(error_of([] { chat(R"({})"); }).first, 400);
  EXPECT_EQ(error_of([] { chat(R"({"messages":[{"role":"wizard","content":"x"}]})"); }).second, "messages[0].role");
  EXPECT_EQ(error_of([] { chat(R"({"messages":[{"role":"user"}]})"); }).second, "messages[0].content");
  EXPECT_EQ(error_of([] { chat(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"); }).first, 400);
  EXPECT_EQ(error_of([] { chat(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})"); }).second, "top_logprobs");
  EXPECT_EQ(error_of([] { chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})"); }).second, "logprobs");
  EXPECT_EQ(error_of([] { chat(R"({"messages":"hello"})"); }).first, 400);
}

// Chat bodies with a user message and the given fields.
std::string chat_with(const std::string& fields) { return R"({"messages":[{"role":"user","content":"x"}],)" + fields + "}"; }

constexpr const char* kTool = R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
                              R"("properties":{"city":{"type":"string"}},"required":["city"]}}})";

TEST(OpenAiRequest, StructuredOutputFields) {
  using K = OutputConstraint::Kind;
  EXPECT_EQ(completion(R"({"prompt":"x"})").constraint.kind, K::None);
  EXPECT_EQ(completion(R"({"prompt":"x","response_format":{"type":"text"}})").constraint.kind, K::None);
  EXPECT_EQ(completion(R"({"prompt":"x","response_format":{"type":"json_object"}})").constraint.kind, K::JsonObject);
  auto r = chat(chat_with(R"("response_format":{"type":"json_schema","json_schema":{"name":"p-1","strict":true,"schema":{"type":"object"}}})"));
  EXPECT_EQ(r.constraint.kind, K::JsonSchema);
  EXPECT_EQ(r.constraint.schema, Json::parse(R"({"type":"object"})"));
  r = chat(chat_with(R"("grammar":"root ::= \"a\"","response_format":{"type":"text"})"));
  EXPECT_EQ(r.constraint.kind, K::Grammar);
  EXPECT_EQ(r.constraint.grammar, "root ::= \"a\"");

  r = chat(chat_with(std::string(R"("tools":[)") + kTool + "]"));
  ASSERT_EQ(r.tool_request.tools.size(), 1u);
  EXPECT_EQ(r.tool_request.tools[0].name, "get_weather");
  EXPECT_EQ(r.tool_request.choice, ToolChoiceMode::Auto);  // the default with tools
  EXPECT_TRUE(r.tool_request.parses() && !r.tool_request.constrained());
  EXPECT_TRUE(r.tools.is_array());  // the template still gets them as given
  EXPECT_FALSE(r.tool_request.parallel);  // one constrained call unless parallel_tool_calls says true
  r = chat(chat_with(std::string(R"("tools":[)") + kTool + R"(],"tool_choice":{"type":"function","function":{"name":"get_weather"}},)"
                     R"("parallel_tool_calls":true)"));
  EXPECT_EQ(r.tool_request.choice, ToolChoiceMode::Named);
  EXPECT_EQ(r.tool_request.named, "get_weather");
  EXPECT_TRUE(r.tool_request.parallel);
  r = chat(chat_with(std::string(R"("tools":[)") + kTool + R"(],"tool_choice":"none")"));
  EXPECT_FALSE(r.tool_request.parses());  // rendered, not parsed
  // A function without parameters takes none.
  r = chat(chat_with(R"("tools":[{"type":"function","function":{"name":"ping"}}],"tool_choice":"required")"));
  EXPECT_EQ(r.tool_request.tools[0].parameters, Json::parse(R"({"type":"object","additionalProperties":false})"));
  EXPECT_TRUE(r.tool_request.constrained());
}

TEST(OpenAiRequest, StructuredOutputFaultsAre400NamingTheField) {
  const std::string tools = std::string(R"("tools":[)") + kTool + "]";
  const std::pair<std::string, std::string> cases[] = {
      {R"("response_format":"json")", "response_format"},
      {R"("response_format":{})", "response_format.type"},
      {R"("response_format":{"type":"xml"})", "response_format.type"},
      {R"("response_format":{"type":"json_schema"})", "response_format.json_schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})", "response_format.json_schema.schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":true}})", "response_format.json_schema.schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":[]}})", "response_format.json_schema.schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"a b","schema":{}}})", "response_format.json_schema.name"},
      {R"("response_format":{"type":"json_schema","json_schema":{"strict":"yes","schema":{}}})", "response_format.json_schema.strict"},
      {R"("grammar":5)", "grammar"},
      {R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"})", "grammar"},
      {R"("tools":{})", "tools"},
      {R"("tools":[5])", "tools[0]"},
      {R"("tools":[{"type":"retrieval"}])", "tools[0].type"},
      {R"("tools":[{"type":"function"}])", "tools[0].function"},
      {R"("tools":[{"type":"function","function":{"name":"has space"}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":")" + std::string(65, 'a') + R"("}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":"f","description":1}}])", "tools[0].function.description"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}])", "tools[0].function.parameters"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}])", "tools[0].function.parameters"},
      {R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])", "tools[1].function.name"},
      {tools + R"(,"tool_choice":"always")", "tool_choice"},
      {tools + R"(,"tool_choice":5)", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"tool","function":{"name":"get_weather"}})", "tool_choice.type"},
      {tools + R"(,"tool_choice":{"type":"function"})", "tool_choice.function.name"},
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"other"}})", "tool_choice.function.name"},
      {R"("tool_choice":"required")", "tool_choice"},
      {tools + R"(,"parallel_tool_calls":1)", "parallel_tool_calls"},
      {tools + R"(,"tool_choice":"required","grammar":"root ::= \"a\"")", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"response_format":{"type":"json_object"})",
       "tool_choice"},
  };
  std::string many = R"("tools":[)";
  for (int i = 0; i < 129; i++) many += fmt::format(R"({}{{"type":"function","function":{{"name":"f{}"}}}})", i ? "," : "", i);
  EXPECT_EQ(error_of([&] { chat(chat_with(many + "]")); }), (std::pair<int, std::string>{400, "tools"}));
  for (const auto& [fields, param] : cases) EXPECT_EQ(error_of([&] { chat(chat_with(fields)); }), (std::pair<int, std::string>{400, param})) << fields;
  // The same checks on completions.
  EXPECT_EQ(error_of([] { completion(R"({"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":1}}})"); }).second,
            "response_format.json_schema.schema");
  EXPECT_EQ(error_of([] { completion(R"({"prompt":"x","grammar":["a"]})"); }).second, "grammar");
}

// The ApiError of resolving a request's grammar: status, param and message.
struct ResolveError {
  int status = 0;
  std::string param, message;
};
ResolveError resolve_error(const GenerationRequest& r) {
  GrammarCache cache;
  try {
    resolve_output_grammar(r.constraint, r.tool_request, ToolCallFormat::Hermes, cache);
  } catch (const ApiError& e) {
    return {e.status(), e.param(), e.what()};
  }
  return {};
}

TEST(OpenAiRequest, StructuredOutputGrammars) {
  GrammarCache cache;
  const auto grammar_of = [&](const GenerationRequest& r) { return resolve_output_grammar(r.constraint, r.tool_request, ToolCallFormat::Hermes, cache); };
  EXPECT_EQ(grammar_of(chat(chat_with(R"("response_format":{"type":"text"})"))), nullptr);
  EXPECT_EQ(grammar_of(chat(chat_with(std::string(R"("tools":[)") + kTool + "]"))), nullptr);  // auto: unconstrained
  auto g = grammar_of(completion(R"({"prompt":"x","response_format":{"type":"json_object"}})"));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(grammar_accepts(g, R"({"a": [1, "b"]})"));
  EXPECT_FALSE(grammar_accepts(g, "[1]"));
  g = grammar_of(chat(chat_with(R"("response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":)"
                                R"({"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}})")));
  EXPECT_TRUE(grammar_accepts(g, R"({"n": 42})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"n": "42"})"));
  g = grammar_of(chat(chat_with(R"("grammar":"root ::= \"yes\" | \"no\"")")));
  EXPECT_TRUE(grammar_accepts(g, "no"));
  g = grammar_of(chat(chat_with(std::string(R"("tools":[)") + kTool + R"(],"tool_choice":"required")")));
  EXPECT_TRUE(grammar_accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  // The same text again is the cached grammar.
  const size_t hits = cache.hits();
  EXPECT_EQ(grammar_of(chat(chat_with(R"("grammar":"root ::= \"yes\" | \"no\"")"))).get(),
            grammar_of(chat(chat_with(R"("grammar":"root ::= \"yes\" | \"no\"")"))).get());
  EXPECT_EQ(cache.hits(), hits + 2);

  // Faults: a keyword the converter refuses names its path; a grammar that does not compile.
  ResolveError e = resolve_error(chat(chat_with(R"("response_format":{"type":"json_schema","json_schema":{"schema":)"
                                                R"({"type":"object","properties":{"x":{"type":"string","foo":1}}}}})")));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "response_format.json_schema.schema");
  EXPECT_NE(e.message.find("$.properties.x.foo"), std::string::npos) << e.message;
  e = resolve_error(chat(chat_with(R"("grammar":"root ::= undefined-rule")")));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "grammar");
  EXPECT_NE(e.message.find("undefined-rule"), std::string::npos) << e.message;
  e = resolve_error(chat(chat_with(std::string(R"("tools":[)") + kTool + R"(,{"type":"function","function":{"name":"g","parameters":)"
                                   R"({"type":"object","properties":{"n":{"type":"integer","multipleOf":3}}}}}],"tool_choice":"required")")));
  EXPECT_EQ(e.param, "tools[1].function.parameters");
  EXPECT_NE(e.message.find("$.properties.n.multipleOf"), std::string::npos) << e.message;
}

TEST(OpenAiRequest, TokenizeAndDetokenize) {
  auto t = parse_tokenize_request(parse_json_body(R"({"content":"abc","add_special":false,"with_pieces":true})", kLimits));
  EXPECT_EQ(t.text, "abc");
  EXPECT_FALSE(t.add_special);
  EXPECT_TRUE(t.with_pieces);
  EXPECT_EQ(parse_tokenize_request(parse_json_body(R"({"prompt":"p"})", kLimits)).text, "p");
  EXPECT_EQ(error_of([] { parse_tokenize_request(parse_json_body(R"({"content":1})", kLimits)); }).first, 400);
  EXPECT_EQ(parse_detokenize_request(parse_json_body(R"({"tokens":[1,2]})", kLimits), 512), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(error_of([] { parse_detokenize_request(parse_json_body(R"({"tokens":[-1]})", kLimits), 512); }).first, 400);
}

TEST(OpenAiRequest, ErrorBodyShape) {
  const Json j = Json::parse(error_body(404, "no such model", "model", "model_not_found"));
  EXPECT_EQ(j["error"]["message"], "no such model");
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  EXPECT_TRUE(Json::parse(error_body(400, "x"))["error"]["param"].is_null());
}

TEST(ApiKey, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("Bearer abd", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("Bearer ab", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal("", "Bearer abc"));
  EXPECT_FALSE(constant_time_equal(std::string("Bearer abc\0", 11), "Bearer abc"));
}

}  // namespace
}  // namespace lumen::server
