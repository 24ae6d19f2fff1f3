#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lumen::server {

void Histogram::observe(double x) {
  if (!std::isfinite(x)) return;
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin());
  counts_[i]++;
  sum_ += x;
  count_++;
}

namespace {

// Prometheus' float format: Go's strconv 'g'-like shortest form is not required; any valid
// float literal is. %.17g round-trips.
std::string num(double x) {
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", x);
}

std::string with_label(const std::string& labels, const std::string& extra) {
  if (labels.empty()) return "{" + extra + "}";
  return "{" + labels + "," + extra + "}";
}

}  // namespace

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); i++) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{} {}\n", name, with_label(labels, fmt::format("le=\"{}\"", num(bounds_[i]))), cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{} {}\n", name, with_label(labels, "le=\"+Inf\""), cum);
  const std::string l = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n", name, l, num(sum_));
  out += fmt::format("{}_count{} {}\n", name, l, count_);
}

namespace {

// vLLM's bucket bounds, extended below: on a CPU with a small model a token can take well
// under a millisecond.
std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
          1.0,    2.5,   5.0,    7.5,   10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
          0.2,    0.3,     0.4,    0.5,   0.75,   1.0,   2.5,  5.0,   7.5,   10.0,  20.0, 40.0, 80.0};
}
std::vector<double> token_buckets() {
  return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};
}

std::string escape_label(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

}  // namespace

ServerMetrics::ServerMetrics()
    : ttft_(latency_buckets()),
      itl_(itl_buckets()),
      e2e_(latency_buckets()),
      queue_(latency_buckets()),
      prefill_(latency_buckets()),
      decode_(latency_buckets()),
      prompt_len_(token_buckets()),
      gen_len_(token_buckets()) {
  for (const char* r : {"stop", "length", "abort", "error"}) finished_[r] = 0;
}

void ServerMetrics::record_completion(const RequestTimings& t, const std::string& finish_reason, bool first_of_request) {
  std::lock_guard lock(mu_);
  finished_[finish_reason]++;
  if (first_of_request) {
    prompt_tokens_ += static_cast<uint64_t>(t.prompt_tokens);
    cached_prompt_tokens_ += static_cast<uint64_t>(t.cached_prompt_tokens);
    prompt_len_.observe(static_cast<double>(t.prompt_tokens));
    queue_.observe(t.queue_ms / 1000.0);
  }
  generation_tokens_ += static_cast<uint64_t>(t.generated_tokens);
  gen_len_.observe(static_cast<double>(t.generated_tokens));
  e2e_.observe(t.total_ms / 1000.0);
  if (t.generated_tokens > 0) {
    ttft_.observe(t.ttft_ms / 1000.0);
    prefill_.observe(t.prefill_ms() / 1000.0);
    decode_.observe(t.decode_ms() / 1000.0);
  }
  for (double ms : t.itl_ms) itl_.observe(ms / 1000.0);
}

void ServerMetrics::record_aborted(int64_t n) {
  std::lock_guard lock(mu_);
  finished_["abort"] += static_cast<uint64_t>(n);
}

void ServerMetrics::record_http_status(int status) {
  std::lock_guard lock(mu_);
  http_[status]++;
}

std::string ServerMetrics::render(const EngineStats* e, const std::string& model_name) const {
  std::lock_guard lock(mu_);
  const std::string model = fmt::format("model_name=\"{}\"", escape_label(model_name));
  std::string o;
  auto head = [&](const char* name, const char* type, const char* help) {
    o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto scalar = [&](const char* name, const char* type, const char* help, double v) {
    head(name, type, help);
    o += fmt::format("{}{{{}}} {}\n", name, model, num(v));
  };
  auto hist = [&](const char* name, const char* help, const Histogram& h) {
    head(name, "histogram", help);
    h.render(o, name, model);
  };
  if (e) {
    scalar("lumen_num_requests_running", "gauge", "Requests being computed (sequences, n > 1 counts each).", static_cast<double>(e->running));
    scalar("lumen_num_requests_waiting", "gauge", "Requests waiting to be scheduled.", static_cast<double>(e->waiting));
    scalar("lumen_kv_cache_blocks_used", "gauge", "KV cache blocks held by requests.", static_cast<double>(e->blocks_used));
    scalar("lumen_kv_cache_num_blocks", "gauge", "KV cache blocks in the pool.", static_cast<double>(e->blocks_total));
    scalar("lumen_kv_cache_bytes_per_token", "gauge", "KV cache bytes one token takes (K and V, every layer).",
           static_cast<double>(e->kv_bytes_per_token));
    scalar("lumen_kv_cache_memory_used_bytes", "gauge", "KV cache bytes in blocks held by requests.",
           static_cast<double>(e->blocks_used) * static_cast<double>(e->kv_bytes_per_block));
    scalar("lumen_kv_cache_memory_bytes", "gauge", "KV cache bytes of the whole pool.",
           static_cast<double>(e->blocks_total) * static_cast<double>(e->kv_bytes_per_block));
    scalar("lumen_kv_cache_usage_perc", "gauge", "Fraction of the KV cache blocks in use (1 = full).",
           e->blocks_total > 0 ? static_cast<double>(e->blocks_used) / static_cast<double>(e->blocks_total) : 0.0);
    scalar("lumen_engine_generated_tokens_total", "counter",
           "Tokens sampled so far, counted as they are made (lumen_generation_tokens_total counts finished completions).",
           static_cast<double>(e->generated_tokens));
    scalar("lumen_engine_computed_tokens_total", "counter", "Tokens evaluated by forward passes (prompt chunks, decodes, drafts).",
           static_cast<double>(e->computed_tokens));
    scalar("lumen_num_preemptions_total", "counter", "Requests preempted (blocks freed, recomputed later).", static_cast<double>(e->preemptions));
    scalar("lumen_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
           static_cast<double>(e->cache.prefix_query_tokens));
    scalar("lumen_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", static_cast<double>(e->cache.prefix_hit_tokens));
    if (e->spec.passes > 0) {  // speculative decoding is on (vLLM's spec_decode names)
      scalar("lumen_spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.", static_cast<double>(e->spec.proposed));
      scalar("lumen_spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", static_cast<double>(e->spec.accepted));
      scalar("lumen_spec_decode_num_target_passes_total", "counter", "Target passes that decoded a request.",
             static_cast<double>(e->spec.passes));
      scalar("lumen_spec_decode_num_emitted_tokens_total", "counter", "Tokens those passes emitted.", static_cast<double>(e->spec.emitted));
      head("lumen_spec_decode_num_accepted_tokens_per_pos_total", "counter", "Draft tokens accepted, by draft position (0 = first).");
      for (size_t i = 0; i < e->spec.accepted_at.size(); i++)
        o += fmt::format("lumen_spec_decode_num_accepted_tokens_per_pos_total{{{},position=\"{}\"}} {}\n", model, i,
                         e->spec.accepted_at[i]);
      head("lumen_spec_decode_num_draft_tokens_per_pos_total", "counter", "Draft tokens verified, by draft position (0 = first).");
      for (size_t i = 0; i < e->spec.proposed_at.size(); i++)
        o += fmt::format("lumen_spec_decode_num_draft_tokens_per_pos_total{{{},position=\"{}\"}} {}\n", model, i,
                         e->spec.proposed_at[i]);
    }
  }
  scalar("lumen_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", static_cast<double>(prompt_tokens_));
  scalar("lumen_generation_tokens_total", "counter", "Generated tokens of finished completions.", static_cast<double>(generation_tokens_));
  scalar("lumen_cached_prompt_tokens_total", "counter", "Prompt tokens of finished requests taken from the prefix cache.",
         static_cast<double>(cached_prompt_tokens_));
  head("lumen_request_success_total", "counter", "Finished completions by finish reason (abort: the client went away).");
  for (const auto& [reason, n] : finished_) o += fmt::format("lumen_request_success_total{{{},finished_reason=\"{}\"}} {}\n", model, reason, n);
  head("lumen_http_requests_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, n] : http_) o += fmt::format("lumen_http_requests_total{{status=\"{}\"}} {}\n", status, n);
  hist("lumen_time_to_first_token_seconds", "Time from submission to the first generated token.", ttft_);
  hist("lumen_inter_token_latency_seconds", "Time between consecutive generated tokens.", itl_);
  hist("lumen_e2e_request_latency_seconds", "Time from submission to the end of a completion.", e2e_);
  hist("lumen_request_queue_time_seconds", "Time from submission to the first step that computes the request.", queue_);
  hist("lumen_request_prefill_time_seconds", "Time from the first step to the first token.", prefill_);
  hist("lumen_request_decode_time_seconds", "Time from the first token to the last.", decode_);
  hist("lumen_request_prompt_tokens", "Prompt length of finished requests, in tokens.", prompt_len_);
  hist("lumen_request_generation_tokens", "Generated tokens per finished completion.", gen_len_);
  return o;
}

}  // namespace lumen::server
