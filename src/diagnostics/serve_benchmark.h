// The serving benchmark behind `lumen bench serve`, after `vllm bench serve`: its own HTTP
// client drives a running OpenAI-compatible server with streaming /v1/completions requests at
// fixed concurrency levels and reports throughput (requests/s, generated tokens/s) and the
// latency a user sees: TTFT (request sent to first streamed token), ITL (between streamed
// tokens) and end-to-end latency, at p50/p90/p99.
//
// Prompts are exact-length token-id lists drawn from the server's own vocabulary (the ids of a
// fixed English text, through /tokenize), so any model works and every request's prompt has
// exactly --prompt-len tokens, the first --shared-prefix of them common to all. Generation runs
// with ignore_eos, so every request makes exactly --gen-len tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lumen {

struct ServeBenchConfig {
  std::string url = "http://127.0.0.1:8080";  // scheme://host:port (http only)
  std::string api_key;
  std::string model;         // "" = the server's first from /v1/models
  int64_t prompt_len = 256;
  int64_t gen_len = 128;
  int64_t shared_prefix = 0;
  int64_t requests = 0;      // per concurrency level; 0 = max(8, 2 x concurrency)
  uint64_t seed = 1;
  double timeout_s = 600;    // per request
};

struct ServeBenchResult {
  int concurrency = 0;
  int64_t requests = 0, errors = 0;
  std::string first_error;
  double duration_s = 0;
  double requests_per_s = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0, cached_tokens = 0;
  double output_tok_s = 0;  // generated tokens / duration
  // Milliseconds: p50, p90, p99 (and the mean) over requests (TTFT, E2E) or token gaps (ITL).
  struct Dist {
    double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  };
  Dist ttft_ms, itl_ms, e2e_ms;
};

// Runs each concurrency level in turn (a short warm-up request first). progress(done, total)
// is called as requests finish. Errors reaching the server at all are an Error; failed
// requests are counted in the result.
std::vector<ServeBenchResult> run_serve_benchmark(const ServeBenchConfig& config, const std::vector<int>& concurrency,
                                                  const std::function<void(int concurrency, int64_t done, int64_t total)>& progress);

}  // namespace lumen
