#include "server/generation_stream.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace lumen::server {

namespace {

// OpenAI's finish reasons: an end-of-generation token is a stop.
const char* api_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "abort";
    case FinishReason::Error: return "error";
    default: return "stop";
  }
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse(const Json& j) { return "data: " + dump(j) + "\n\n"; }

// A token's bytes as a JSON list, since a piece may be part of a character.
Json bytes_of(const std::string& piece) {
  Json b = Json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

// The finish reason of an output that holds calls: "tool_calls", unless the token budget closed
// the grammar (the calls parse, but their arguments were cut short: the client should know).
const char* calls_finish_reason(FinishReason r) { return r == FinishReason::Length ? "length" : "tool_calls"; }

// message.tool_calls, each with a fresh id.
Json tool_calls_json(const std::vector<ToolCall>& calls, ToolCallFormat format) {
  Json out = Json::array();
  for (const ToolCall& call : calls)
    out.push_back(Json{{"id", new_tool_call_id(format)},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return out;
}

}  // namespace

// Per draft position: the share of the drafts at that position that were accepted.
static Json spec_rates(const RequestTimings& t) {
  Json a = Json::array();
  for (size_t i = 0; i < t.spec_proposed_at.size(); i++)
    a.push_back(t.spec_proposed_at[i] > 0 ? static_cast<double>(t.spec_accepted_at[i]) / static_cast<double>(t.spec_proposed_at[i]) : 0.0);
  return a;
}

Json timings_json(const RequestTimings& t) {
  const double computed = static_cast<double>(t.prompt_tokens - t.cached_prompt_tokens);
  const double prefill = t.prefill_ms();
  Json j{
      {"queue_ms", t.queue_ms},
      {"ttft_ms", t.ttft_ms},
      {"prompt_tokens", t.prompt_tokens},
      {"cached_prompt_tokens", t.cached_prompt_tokens},
      {"prompt_ms", prefill},
      {"prompt_per_second", prefill > 0 ? 1000.0 * computed / prefill : 0.0},
      {"generated_tokens", t.generated_tokens},
      {"decode_ms", t.decode_ms()},
      {"decode_per_second", t.decode_tok_s()},
      {"itl_ms_mean", t.itl_mean()},
      {"itl_ms_p50", t.itl_percentile(50)},
      {"itl_ms_p99", t.itl_percentile(99)},
      {"total_ms", t.total_ms},
      {"preemptions", t.preemptions},
  };
  if (t.spec_on())
    j["spec"] = {{"proposed", t.spec_proposed},
                 {"accepted", t.spec_accepted},
                 {"acceptance_rate", t.spec_acceptance_rate()},
                 {"tokens_per_target_pass", t.spec_tokens_per_pass()},
                 {"acceptance_rate_per_position", spec_rates(t)}};
  return j;
}

GenerationStream::GenerationStream(ResponseContext ctx, std::vector<std::shared_ptr<RequestHandle>> handles,
                                   std::vector<int64_t> prompt_tokens)
    : ctx_(std::move(ctx)), handles_(std::move(handles)), prompt_tokens_(std::move(prompt_tokens)) {
  choices_.resize(handles_.size() * static_cast<size_t>(ctx_.n));
  for (auto& c : choices_) {
    if (!ctx_.logprobs) c.logprobs = nullptr;
    else if (ctx_.chat) c.logprobs = Json::array();
    else c.logprobs = Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
    if (ctx_.parse_tools && ctx_.stream) c.splitter = std::make_unique<ToolCallSplitter>(ctx_.tool_format, ctx_.tool_names);
  }
}

GenerationStream::~GenerationStream() {
  for (auto& h : handles_) h->set_listener({});
  if (!done_) cancel();
}

void GenerationStream::set_listener(std::function<void()> wake) {
  for (auto& h : handles_) h->set_listener(wake);
}

void GenerationStream::cancel() {
  if (cancelled_ || done_) return;
  cancelled_ = true;
  // What the client never saw end still counts, as aborted. Counted before the engine is told:
  // once it frees the sequences, /metrics may show them gone, and the abort must already be there.
  if (ctx_.metrics)
    ctx_.metrics->record_aborted(static_cast<int64_t>(std::count_if(choices_.begin(), choices_.end(), [](const Choice& c) { return !c.finished; })));
  for (auto& h : handles_) {
    h->set_listener({});
    h->cancel();
  }
}

void GenerationStream::add_logprobs(Json& into, const StreamEvent& e, size_t text_offset) const {
  const Tokenizer& tok = *ctx_.tokenizer;
  const std::string piece = tok.token_to_piece(e.token, /*special=*/true);
  if (ctx_.chat) {
    Json top = Json::array();
    for (const TokenProb& t : e.top_logprobs) {
      const std::string p = tok.token_to_piece(t.id, true);
      top.push_back(Json{{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
    }
    into.push_back(Json{{"token", piece}, {"logprob", e.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", std::move(top)}});
    return;
  }
  Json top = Json::object();
  for (const TokenProb& t : e.top_logprobs) top[tok.token_to_piece(t.id, true)] = t.logprob;
  into["tokens"].push_back(piece);
  into["token_logprobs"].push_back(e.logprob);
  into["top_logprobs"].push_back(std::move(top));
  into["text_offset"].push_back(text_offset);
}

Json GenerationStream::chunk_json(const Json& choices) const {
  Json j{{"id", ctx_.id},
         {"object", ctx_.chat ? "chat.completion.chunk" : "text_completion"},
         {"created", ctx_.created},
         {"model", ctx_.model},
         {"system_fingerprint", "lumen"},
         {"choices", choices}};
  if (ctx_.include_usage) j["usage"] = nullptr;
  return j;
}

Json GenerationStream::usage_json() const {
  int64_t prompt = 0, cached = 0, completion = 0;
  for (int64_t p : prompt_tokens_) prompt += p;
  for (size_t i = 0; i < choices_.size(); i++) {
    completion += choices_[i].tokens;
    if (i % static_cast<size_t>(ctx_.n) == 0) cached += choices_[i].timings.cached_prompt_tokens;
  }
  return Json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

ResponseStream::Chunk GenerationStream::poll() {
  Chunk out;
  if (done_) {
    out.done = true;
    return out;
  }
  const size_t n = static_cast<size_t>(ctx_.n);
  for (size_t h = 0; h < handles_.size(); h++) {
    while (auto e = handles_[h]->try_next()) {
      const size_t idx = h * n + static_cast<size_t>(e->index);
      if (idx >= choices_.size()) continue;
      Choice& c = choices_[idx];
      if (c.finished) continue;
      Json delta_logprobs = nullptr;
      const bool eog = e->finished && e->finish_reason == FinishReason::Eog;
      if (e->token >= 0) c.tokens++;
      const bool first = !c.started;
      c.started = true;
      std::string text;
      if (first && !ctx_.echo.empty() && !ctx_.chat) text = ctx_.echo[h];
      text += e->text;
      if (ctx_.logprobs && e->token >= 0 && !eog) {
        if (ctx_.stream) {
          delta_logprobs = ctx_.chat ? Json::array()
                                     : Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
          add_logprobs(delta_logprobs, *e, c.text.size());
        } else {
          add_logprobs(c.logprobs, *e, c.text.size());
        }
      }
      c.text += text;
      if (e->finished) {
        c.finished = true;
        c.reason = e->finish_reason;
        c.error = e->error;
        c.timings = e->timings;
        n_finished_++;
        if (ctx_.metrics) ctx_.metrics->record_completion(e->timings, api_finish_reason(e->finish_reason), e->index == 0);
      }
      if (!ctx_.stream) continue;
      if (c.finished && c.reason == FinishReason::Error) {
        out.data += sse(Json::parse(error_body(500, "generation failed: " + c.error)));
        continue;
      }
      // With tools, text that may be a call is held back until the output ends and is parsed.
      std::vector<ToolCall> calls;
      if (c.splitter) {
        text = c.splitter->push(text);
        if (c.finished) {
          std::string rest;
          calls = c.splitter->finish(rest).calls;
          text += rest;
        }
      }
      if (text.empty() && delta_logprobs.is_null() && !c.finished && !(first && ctx_.chat)) continue;
      Json choice{{"index", idx}};
      if (ctx_.chat) {
        Json delta = Json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || first) delta["content"] = text;
        const bool carries = !delta.empty() || !delta_logprobs.is_null();
        choice["delta"] = std::move(delta);
        choice["logprobs"] = delta_logprobs.is_null() ? Json(nullptr) : Json{{"content", delta_logprobs}};
        if (!calls.empty()) {
          if (carries) {
            choice["finish_reason"] = nullptr;
            out.data += sse(chunk_json(Json::array({choice})));
          }
          out.data += tool_call_chunks(idx, calls, c);
          continue;
        }
      } else {
        choice["text"] = text;
        choice["logprobs"] = delta_logprobs;
      }
      choice["finish_reason"] = c.finished ? Json(api_finish_reason(c.reason)) : Json(nullptr);
      Json chunk = chunk_json(Json::array({choice}));
      if (c.finished) chunk["timings"] = timings_json(c.timings);
      out.data += sse(chunk);
    }
  }
  if (n_finished_ < choices_.size()) return out;
  done_ = true;
  out.done = true;
  for (auto& hd : handles_) hd->set_listener({});
  if (!ctx_.stream) {
    out.data = whole_body();
    out.status = 200;
    for (const auto& c : choices_)
      if (c.reason == FinishReason::Error) {
        out.status = 500;
        out.data = error_body(500, "generation failed: " + c.error);
      }
    return out;
  }
  if (ctx_.include_usage) {
    Json u = chunk_json(Json::array());
    u["usage"] = usage_json();
    out.data += sse(u);
  }
  out.data += "data: [DONE]\n\n";
  return out;
}

std::string GenerationStream::tool_call_chunks(size_t idx, const std::vector<ToolCall>& calls, const Choice& c) const {
  // As OpenAI streams them: a call's id, type and name with empty arguments, then the arguments.
  std::string out;
  const auto delta_chunk = [&](Json delta, Json finish) {
    Json choice{{"index", idx}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}};
    return chunk_json(Json::array({std::move(choice)}));
  };
  const Json whole = tool_calls_json(calls, ctx_.tool_format);
  for (size_t i = 0; i < whole.size(); i++) {
    Json head{{"index", i}, {"id", whole[i]["id"]}, {"type", "function"}, {"function", {{"name", whole[i]["function"]["name"]}, {"arguments", ""}}}};
    out += sse(delta_chunk(Json{{"tool_calls", Json::array({std::move(head)})}}, nullptr));
    Json args{{"index", i}, {"function", {{"arguments", whole[i]["function"]["arguments"]}}}};
    out += sse(delta_chunk(Json{{"tool_calls", Json::array({std::move(args)})}}, nullptr));
  }
  Json last = delta_chunk(Json::object(), calls_finish_reason(c.reason));
  last["timings"] = timings_json(c.timings);
  out += sse(last);
  return out;
}

std::string GenerationStream::whole_body() const {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); i++) {
    const Choice& c = choices_[i];
    Json choice{{"index", i}};
    std::string finish = api_finish_reason(c.reason);
    if (ctx_.chat) {
      Json message{{"role", "assistant"}, {"content", c.text}};
      if (ctx_.parse_tools) {
        ParsedToolOutput parsed = parse_tool_calls(ctx_.tool_format, c.text, ctx_.tool_names);
        if (!parsed.calls.empty()) {
          // OpenAI's shape: content beside the calls when there is some, else null.
          message["content"] = parsed.content.empty() ? Json(nullptr) : Json(parsed.content);
          message["tool_calls"] = tool_calls_json(parsed.calls, ctx_.tool_format);
          finish = calls_finish_reason(c.reason);
        }
      }
      choice["message"] = std::move(message);
      choice["logprobs"] = c.logprobs.is_null() ? Json(nullptr) : Json{{"content", c.logprobs}};
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = c.logprobs;
    }
    choice["finish_reason"] = finish;
    choices.push_back(std::move(choice));
  }
  Json j{{"id", ctx_.id},
         {"object", ctx_.chat ? "chat.completion" : "text_completion"},
         {"created", ctx_.created},
         {"model", ctx_.model},
         {"system_fingerprint", "lumen"},
         {"choices", std::move(choices)},
         {"usage", usage_json()}};
  if (!choices_.empty()) j["timings"] = timings_json(choices_[0].timings);
  return dump(j);
}

}  // namespace lumen::server
