// GenerationStream: the response of /v1/completions and /v1/chat/completions, built from the
// engine's per-request event streams. One request body may hold several prompts, each one
// engine request with n completions; choice index = prompt * n + completion, as OpenAI numbers
// them. Streamed, each event becomes one server-sent-events chunk (`data: {...}\n\n`, valid
// JSON and valid UTF-8: the engine releases text only in whole characters), then
// `data: [DONE]`; otherwise one JSON body when every completion has ended. Finished
// completions feed the metrics. The HTTP connection polls it on its I/O thread; cancel() (the
// client went away) cancels every engine request, which frees their KV blocks at the next step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace lumen {
class Tokenizer;
}

namespace lumen::server {

struct ResponseContext {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  std::vector<std::string> echo;  // completions with echo: each prompt's text, put before its choices
  // Chat with tools (tool_choice other than "none"): outputs are parsed for tool calls.
  bool parse_tools = false;
  ToolCallFormat tool_format = ToolCallFormat::Hermes;
  std::vector<std::string> tool_names;  // the offered functions
  const Tokenizer* tokenizer = nullptr;
  ServerMetrics* metrics = nullptr;
};

class GenerationStream : public ResponseStream {
 public:
  // prompt_tokens[i]: the length of handles[i]'s prompt (for usage).
  GenerationStream(ResponseContext ctx, std::vector<std::shared_ptr<RequestHandle>> handles, std::vector<int64_t> prompt_tokens);
  ~GenerationStream() override;

  bool streamed() const override { return ctx_.stream; }
  std::string content_type() const override { return ctx_.stream ? "text/event-stream" : "application/json"; }
  void set_listener(std::function<void()> wake) override;
  Chunk poll() override;
  void cancel() override;

 private:
  struct Choice {
    std::string text;
    Json logprobs;  // chat: the content list; completions: the four parallel lists
    int64_t tokens = 0;
    bool finished = false;
    bool started = false;  // chat: the role delta went out
    FinishReason reason = FinishReason::None;
    std::string error;
    RequestTimings timings;
    std::unique_ptr<ToolCallSplitter> splitter;  // streamed chat with tools: holds back what may be a call
  };
  // The token's log-probability entries in this endpoint's shape, appended to `into`.
  void add_logprobs(Json& into, const StreamEvent& e, size_t text_offset) const;
  Json chunk_json(const Json& choices) const;
  // Streamed tool calls: each call's name, then its arguments, then finish_reason "tool_calls".
  std::string tool_call_chunks(size_t idx, const std::vector<ToolCall>& calls, const Choice& c) const;
  Json usage_json() const;
  std::string whole_body() const;

  ResponseContext ctx_;
  std::vector<std::shared_ptr<RequestHandle>> handles_;
  std::vector<int64_t> prompt_tokens_;
  std::vector<Choice> choices_;
  size_t n_finished_ = 0;
  bool done_ = false;
  bool cancelled_ = false;
};

// The `timings` extension of a response: queue, TTFT, prefill and decode speed, ITL.
Json timings_json(const RequestTimings& t);

}  // namespace lumen::server
