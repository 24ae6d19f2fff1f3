#include "server/openai_request.h"

#include <cmath>
#include <limits>

namespace lumen::server {

std::string ApiError::type() const {
  switch (status_) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status_ >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  const ApiError e(status, message, param, code);
  Json err = {{"message", message}, {"type", e.type()}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) err["param"] = param;
  if (!code.empty()) err["code"] = code;
  else err["code"] = status;
  return Json{{"error", err}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json parse_json_body(std::string_view body, const ApiLimits& limits) {
  // Nesting is bounded before parsing: the parser and the destructor of the parsed value
  // recurse once per level.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limits.max_json_depth)
        throw ApiError(400, fmt::format("the JSON body nests deeper than {} levels", limits.max_json_depth));
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw ApiError(400, fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object");
  return j;
}

namespace {

const Json* field(const Json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const Json& body, const char* key, bool def) {
  const Json* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) bad_request(key, "'{}' must be a boolean", key);
  return v->get<bool>();
}

double get_number(const Json& body, const char* key, double def, double lo, double hi, bool lo_open = false) {
  const Json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) bad_request(key, "'{}' must be a number", key);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    bad_request(key, "'{}' must be {} {} and <= {}, got {}", key, lo_open ? ">" : ">=", lo, hi, x);
  return x;
}

// An integer (an integral float is accepted, as Python clients may send 16.0).
int64_t as_int(const Json& v, const std::string& what, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad_request(what, "'{}' is out of range", what);
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) bad_request(what, "'{}' must be an integer", what);
    x = static_cast<int64_t>(d);
  } else {
    bad_request(what, "'{}' must be an integer", what);
  }
  if (x < lo || x > hi) bad_request(what, "'{}' must be in [{}, {}], got {}", what, lo, hi, x);
  return x;
}

int64_t get_int(const Json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  const Json* v = field(body, key);
  return v ? as_int(*v, key, lo, hi) : def;
}

std::vector<int32_t> token_list(const Json& arr, const std::string& what, int32_t n_vocab) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const auto& t : arr) {
    if (!t.is_number_integer() && !t.is_number_unsigned()) bad_request(what, "'{}' must hold only integer token ids", what);
    const int64_t id = as_int(t, what, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (id < 0 || id >= n_vocab) bad_request(what, "token id {} in '{}' is outside the vocabulary [0, {})", id, what, n_vocab);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// The fields both generation endpoints share.
void parse_common(const Json& body, const ApiLimits& limits, int32_t n_vocab, GenerationRequest& r) {
  if (const Json* m = field(body, "model")) {
    if (!m->is_string()) bad_request("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  if (const Json* u = field(body, "user"); u && !u->is_string()) bad_request("user", "'user' must be a string");
  SamplingParams& s = r.params.sampling;
  // OpenAI's defaults: temperature 1, top_p 1, no top-k / min-p / penalties.
  s.temperature = static_cast<float>(get_number(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(get_number(body, "top_p", 1.0, 0.0, 1.0, /*lo_open=*/true));
  // -1 and 0 both mean off (vLLM uses -1).
  const int64_t top_k = get_int(body, "top_k", 0, -1, std::numeric_limits<int32_t>::max());
  s.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  s.min_p = static_cast<float>(get_number(body, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty = static_cast<float>(get_number(body, "repetition_penalty", 1.0, 0.0, 10.0, /*lo_open=*/true));
  // OpenAI's penalties look at every generated token; llama.cpp's window is a CLI matter.
  s.penalty_last_n = -1;

  const Json* mt = field(body, "max_completion_tokens");
  if (!mt) mt = field(body, "max_tokens");
  if (mt) {
    s.max_tokens = static_cast<int32_t>(as_int(*mt, mt == field(body, "max_tokens") ? "max_tokens" : "max_completion_tokens", 1,
                                               std::numeric_limits<int32_t>::max()));
    r.max_tokens_given = true;
  }
  if (const Json* sd = field(body, "seed")) {
    const int64_t seed = as_int(*sd, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    s.seed = static_cast<uint64_t>(seed);
    r.seed_given = true;
  }
  if (const Json* st = field(body, "stop")) {
    std::vector<std::string> stops;
    if (st->is_string()) stops.push_back(st->get<std::string>());
    else if (st->is_array()) {
      if (st->size() > static_cast<size_t>(limits.max_stop)) bad_request("stop", "'stop' may hold at most {} strings", limits.max_stop);
      for (const auto& x : *st) {
        if (!x.is_string()) bad_request("stop", "'stop' must be a string or a list of strings");
        stops.push_back(x.get<std::string>());
      }
    } else {
      bad_request("stop", "'stop' must be a string or a list of strings");
    }
    for (const auto& x : stops) {
      if (x.empty()) bad_request("stop", "a stop string is empty");
      if (x.size() > limits.max_stop_bytes) bad_request("stop", "a stop string is longer than {} bytes", limits.max_stop_bytes);
    }
    s.stop = std::move(stops);
  }
  if (const Json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias");
    if (lb->size() > limits.max_logit_bias) bad_request("logit_bias", "'logit_bias' may hold at most {} entries", limits.max_logit_bias);
    for (const auto& [key, bias] : lb->items()) {
      int64_t id = -1;
      size_t used = 0;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != key.size()) bad_request("logit_bias", "logit_bias key '{}' is not a token id", key);
      if (id < 0 || id >= n_vocab) bad_request("logit_bias", "logit_bias token id {} is outside the vocabulary [0, {})", id, n_vocab);
      if (!bias.is_number()) bad_request("logit_bias", "logit_bias for token {} must be a number", id);
      const double b = bias.get<double>();
      if (!(b >= -100.0 && b <= 100.0)) bad_request("logit_bias", "logit_bias for token {} must be in [-100, 100], got {}", id, b);
      s.logit_bias.push_back({static_cast<int32_t>(id), static_cast<float>(b)});
    }
  }
  r.params.n = static_cast<int>(get_int(body, "n", 1, 1, limits.max_n));
  r.params.ignore_eos = get_bool(body, "ignore_eos", false);
  r.stream = get_bool(body, "stream", false);
  if (const Json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    r.include_usage = get_bool(*so, "include_usage", false);
  }
}

// Chat content: a string, or a list of text parts joined (OpenAI's content parts).
std::string content_text(const Json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request(where, "'{}' must be a string or a list of content parts", where);
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object()) bad_request(where, "each part of '{}' must be an object", where);
    const Json* type = field(part, "type");
    if (!type || !type->is_string()) bad_request(where, "each part of '{}' needs a string 'type'", where);
    if (*type != "text")
      bad_request(where, "content part type '{}' is not supported: this model reads text only", type->get<std::string>());
    const Json* t = field(part, "text");
    if (!t || !t->is_string()) bad_request(where, "a text part of '{}' needs a string 'text'", where);
    text += t->get<std::string>();
  }
  return text;
}

}  // namespace

GenerationRequest parse_completion_request(const Json& body, const ApiLimits& limits, int32_t n_vocab) {
  GenerationRequest r;
  r.chat = false;
  const Json* p = field(body, "prompt");
  if (!p) bad_request("prompt", "'prompt' is required");
  // A string, a list of strings, a list of token ids, or a list of token-id lists.
  if (p->is_string()) {
    r.prompts.push_back({false, p->get<std::string>(), {}});
  } else if (p->is_array()) {
    if (p->empty()) bad_request("prompt", "'prompt' is an empty list");
    if ((*p)[0].is_number()) {
      r.prompts.push_back({true, {}, token_list(*p, "prompt", n_vocab)});
    } else {
      if (p->size() > static_cast<size_t>(limits.max_prompts))
        bad_request("prompt", "'prompt' may hold at most {} prompts", limits.max_prompts);
      for (const auto& x : *p) {
        if (x.is_string()) r.prompts.push_back({false, x.get<std::string>(), {}});
        else if (x.is_array()) {
          if (x.empty()) bad_request("prompt", "a prompt in 'prompt' is an empty list of tokens");
          r.prompts.push_back({true, {}, token_list(x, "prompt", n_vocab)});
        } else {
          bad_request("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists");
        }
      }
    }
  } else {
    bad_request("prompt", "'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists");
  }
  parse_common(body, limits, n_vocab, r);
  r.constraint = parse_output_constraint(body);
  r.echo = get_bool(body, "echo", false);
  // Completions' logprobs is the number of most likely tokens to report with each token.
  if (const Json* lp = field(body, "logprobs")) {
    if (lp->is_boolean()) bad_request("logprobs", "'logprobs' must be an integer for completions");
    const int64_t k = as_int(*lp, "logprobs", 0, limits.max_logprobs);
    r.params.logprobs = true;
    r.params.top_logprobs = static_cast<int>(k);
  }
  return r;
}

GenerationRequest parse_chat_request(const Json& body, const ApiLimits& limits, int32_t n_vocab) {
  GenerationRequest r;
  r.chat = true;
  const Json* msgs = field(body, "messages");
  if (!msgs) bad_request("messages", "'messages' is required");
  if (!msgs->is_array()) bad_request("messages", "'messages' must be a list");
  if (msgs->empty()) bad_request("messages", "'messages' is empty");
  r.messages = Json::array();
  for (size_t i = 0; i < msgs->size(); i++) {
    const Json& m = (*msgs)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad_request(where, "'{}' must be an object", where);
    const Json* role = field(m, "role");
    if (!role || !role->is_string()) bad_request(where + ".role", "'{}.role' must be a string", where);
    std::string rs = role->get<std::string>();
    if (rs == "developer") rs = "system";  // OpenAI's newer name for the system role
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool")
      bad_request(where + ".role", "unknown role '{}' in {} (expected system, developer, user, assistant or tool)",
                  role->get<std::string>(), where);
    Json out = m;  // other keys (name, tool_call_id, tool_calls, ...) pass to the template
    out["role"] = rs;
    const Json* content = field(m, "content");
    const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (content) {
      out["content"] = content_text(*content, where + ".content");
    } else if (rs == "assistant" && has_calls) {
      // A call turn's content is null on the wire; templates concatenate it as a string
      // (Qwen 3 tests '</think>' in it), so they get "".
      out["content"] = "";
    } else {
      bad_request(where + ".content", "'{}.content' is required", where);
    }
    if (has_calls) {
      const Json& calls = m["tool_calls"];
      if (!calls.is_array()) bad_request(where + ".tool_calls", "'{}.tool_calls' must be a list", where);
      // Templates expect each call's arguments as an object (the transformers convention),
      // the wire format sends a JSON string: parse it when it is one.
      for (auto& call : out["tool_calls"]) {
        if (!call.is_object()) bad_request(where + ".tool_calls", "each tool call must be an object");
        if (call.contains("function") && call["function"].is_object()) {
          auto& fn = call["function"];
          if (fn.contains("arguments") && fn["arguments"].is_string()) {
            try {
              Json args = Json::parse(fn["arguments"].get<std::string>());
              if (args.is_object()) fn["arguments"] = std::move(args);
            } catch (const Json::exception&) {
              // not JSON: the template gets the string
            }
          }
        }
      }
    }
    r.messages.push_back(std::move(out));
  }
  r.tools = nullptr;
  if (const Json* t = field(body, "tools")) {
    if (!t->is_array()) bad_request("tools", "'tools' must be a list");
    r.tools = *t;
  }
  r.constraint = parse_output_constraint(body);
  r.tool_request = parse_tool_request(body, r.constraint);
  r.chat_template_kwargs = Json::object();
  if (const Json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.chat_template_kwargs = *kw;
  }
  r.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
  parse_common(body, limits, n_vocab, r);
  // Chat's logprobs is a boolean, with top_logprobs the number of alternatives.
  r.params.logprobs = get_bool(body, "logprobs", false);
  const int64_t k = get_int(body, "top_logprobs", 0, 0, limits.max_logprobs);
  if (k > 0 && !r.params.logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  r.params.top_logprobs = static_cast<int>(k);
  return r;
}

TokenizeRequest parse_tokenize_request(const Json& body) {
  TokenizeRequest r;
  const Json* c = field(body, "content");
  const char* name = "content";
  if (!c) {
    c = field(body, "prompt");
    name = "prompt";
  }
  if (!c) bad_request("content", "'content' (or 'prompt') is required");
  if (!c->is_string()) bad_request(name, "'{}' must be a string", name);
  r.text = c->get<std::string>();
  r.add_special = get_bool(body, "add_special", get_bool(body, "add_special_tokens", true));
  r.with_pieces = get_bool(body, "with_pieces", false);
  return r;
}

std::vector<int32_t> parse_detokenize_request(const Json& body, int32_t n_vocab) {
  const Json* t = field(body, "tokens");
  if (!t) bad_request("tokens", "'tokens' is required");
  if (!t->is_array()) bad_request("tokens", "'tokens' must be a list of token ids");
  return token_list(*t, "tokens", n_vocab);
}

}  // namespace lumen::server
