// ServerMetrics: what /metrics shows, in Prometheus' text format (version 0.0.4), under vLLM's
// names with the prefix `lumen_` (vllm:time_to_first_token_seconds ->
// lumen_time_to_first_token_seconds): not `lumen:`, because a colon is reserved for recording
// rules and `promtool check metrics` refuses it. Latencies and lengths are histograms, fed when a
// completion ends from the engine's per-request timings; the engine's state (running, waiting,
// KV blocks, preemptions, prefix-cache hits) is read at scrape time. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_core.h"

namespace lumen::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double x);
  // The metric's lines: cumulative buckets, le="+Inf", _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last: above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  // One finished completion (of a request's n): its timings; the prompt is counted once per
  // request (first_of_request).
  void record_completion(const RequestTimings& t, const std::string& finish_reason, bool first_of_request);
  // Completions whose client went away before they ended: counted (finish reason "abort"), but
  // kept out of the latency and length histograms, which they would fill with zeros.
  void record_aborted(int64_t n);
  void record_http_status(int status);
  // The whole exposition. `engine` null: the model is still loading (engine gauges absent).
  std::string render(const EngineStats* engine, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, queue_, prefill_, decode_, prompt_len_, gen_len_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0, cached_prompt_tokens_ = 0;
  std::map<std::string, uint64_t> finished_;  // by finish reason
  std::map<int, uint64_t> http_;              // by status
};

}  // namespace lumen::server
