// The OpenAI-compatible request bodies, parsed and validated before anything is queued (as
// TGI's validation.rs does): every field's type and range is checked here and a fault is an
// ApiError (400) naming the field. Pure functions of the JSON text, so the fuzzer drives them.
// Unknown fields are ignored, as OpenAI does; the structured-output fields (response_format,
// grammar, tools, tool_choice, parallel_tool_calls) are validated in structured_request.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_core.h"
#include "server/api_error.h"
#include "server/structured_request.h"

namespace lumen::server {

using Json = nlohmann::ordered_json;  // key order is kept: tojson in chat templates shows it

struct ApiLimits {
  int max_json_depth = 64;
  int max_n = 16;                // the engine's most completions per request
  int max_stop = 16;             // stop strings per request
  size_t max_stop_bytes = 1024;  // per stop string
  int max_logprobs = 20;         // top_logprobs / completions' logprobs
  int max_prompts = 64;          // prompts in one completions request
  size_t max_logit_bias = 1024;  // entries
};

// Parses a request body: 400 for malformed JSON, invalid UTF-8 in it, nesting deeper than
// max_json_depth, or a body that is not a JSON object.
Json parse_json_body(std::string_view body, const ApiLimits& limits);

struct PromptInput {
  bool is_tokens = false;
  std::string text;             // !is_tokens
  std::vector<int32_t> tokens;  // is_tokens
};

// What /v1/completions and /v1/chat/completions share.
struct GenerationRequest {
  bool chat = false;
  std::string model;                // "" when absent
  std::vector<PromptInput> prompts; // completions: one or more prompts
  Json messages;                    // chat: the conversation, normalised (content as a string)
  Json tools;                       // chat: null when absent (as given: the template renders it)
  ToolRequest tool_request;         // chat: the validated tools, tool_choice, parallel_tool_calls
  OutputConstraint constraint;      // response_format / grammar
  Json chat_template_kwargs;        // chat: extra template variables (an object)
  bool add_generation_prompt = true;
  GenerationParams params;          // sampling, n, logprobs, top_logprobs, ignore_eos
  bool max_tokens_given = false;    // else the endpoint's default (completions 16, chat: the context)
  bool seed_given = false;          // else a random seed, reported in the response
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool echo = false;                // completions: the prompt's text before the completion
};

// n_vocab bounds token ids in prompts and logit_bias keys.
GenerationRequest parse_completion_request(const Json& body, const ApiLimits& limits, int32_t n_vocab);
GenerationRequest parse_chat_request(const Json& body, const ApiLimits& limits, int32_t n_vocab);

// /tokenize: {"content" or "prompt": string, "add_special" (default true), "with_pieces"}.
struct TokenizeRequest {
  std::string text;
  bool add_special = true;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize_request(const Json& body);
// /detokenize: {"tokens": [ids]}.
std::vector<int32_t> parse_detokenize_request(const Json& body, int32_t n_vocab);

}  // namespace lumen::server
