// `lumen bench serve`: load a running server with streaming requests at several concurrency
// levels and report throughput and TTFT / ITL / end-to-end latency percentiles.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "diagnostics/serve_benchmark.h"

namespace lumen::cli {

namespace {

struct BenchServeArgs {
  ServeBenchConfig config;
  std::vector<int> concurrency{1, 4, 16};
  bool json = false;
};

nlohmann::json dist_json(const ServeBenchResult::Dist& d) {
  return {{"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}};
}

void run(const BenchServeArgs& a) {
  const bool tty = isatty(STDERR_FILENO);
  auto results = run_serve_benchmark(a.config, a.concurrency, [&](int conc, int64_t done, int64_t total) {
    if (tty) fmt::print(stderr, "\r  concurrency {:>3}: {:>5}/{} requests", conc, done, total);
    else if (done == total) fmt::print(stderr, "  concurrency {}: {} requests done\n", conc, total);
    if (tty && done == total) fmt::print(stderr, "\n");
  });
  bool failed = false;
  if (a.json) {
    for (const auto& r : results) {
      nlohmann::json j{{"concurrency", r.concurrency},
                       {"requests", r.requests},
                       {"errors", r.errors},
                       {"duration_s", r.duration_s},
                       {"requests_per_s", r.requests_per_s},
                       {"prompt_tokens", r.prompt_tokens},
                       {"cached_tokens", r.cached_tokens},
                       {"generated_tokens", r.generated_tokens},
                       {"output_tok_s", r.output_tok_s},
                       {"ttft_ms", dist_json(r.ttft_ms)},
                       {"itl_ms", dist_json(r.itl_ms)},
                       {"e2e_ms", dist_json(r.e2e_ms)}};
      if (r.errors) j["first_error"] = r.first_error;
      failed |= r.errors > 0;
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
  } else {
    fmt::print("{} | prompt {} tokens ({} shared), {} generated per request\n", a.config.url, a.config.prompt_len,
               a.config.shared_prefix, a.config.gen_len);
    fmt::print("{:>5} {:>5} {:>4} {:>8} {:>9} | {:>8} {:>8} {:>8} | {:>7} {:>7} {:>7} | {:>8} {:>8} {:>8}\n", "conc", "reqs", "err",
               "req/s", "gen tok/s", "TTFT p50", "p90", "p99", "ITL p50", "p90", "p99", "E2E p50", "p90", "p99");
    for (const auto& r : results) {
      fmt::print("{:>5} {:>5} {:>4} {:>8.2f} {:>9.1f} | {:>8.1f} {:>8.1f} {:>8.1f} | {:>7.2f} {:>7.2f} {:>7.2f} | {:>8.0f} {:>8.0f} {:>8.0f}\n",
                 r.concurrency, r.requests, r.errors, r.requests_per_s, r.output_tok_s, r.ttft_ms.p50, r.ttft_ms.p90, r.ttft_ms.p99,
                 r.itl_ms.p50, r.itl_ms.p90, r.itl_ms.p99, r.e2e_ms.p50, r.e2e_ms.p90, r.e2e_ms.p99);
      if (r.errors) {
        failed = true;
        fmt::print(stderr, "concurrency {}: {} requests failed; first: {}\n", r.concurrency, r.errors, r.first_error);
      }
    }
    fmt::print("(milliseconds; ITL over every gap between streamed tokens)\n");
  }
  if (failed) fail("some requests failed");
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  static BenchServeArgs a;
  auto* cmd = bench.add_subcommand("serve", "load a running OpenAI-compatible server and report throughput and latency percentiles");
  cmd->add_option("--url", a.config.url, "the server (default http://127.0.0.1:8080)");
  cmd->add_option("--concurrency", a.concurrency, "streams at once, one level after another (default 1,4,16)")->delimiter(',');
  cmd->add_option("--requests", a.config.requests, "requests per level (default max(8, 2 x concurrency))");
  cmd->add_option("--prompt-len", a.config.prompt_len, "prompt tokens per request (default 256)");
  cmd->add_option("--gen-len", a.config.gen_len, "generated tokens per request (default 128; end-of-text is ignored)");
  cmd->add_option("--shared-prefix", a.config.shared_prefix, "leading prompt tokens common to every request (default 0)");
  cmd->add_option("--api-key", a.config.api_key, "sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--model", a.config.model, "the model name to send (default the server's first)");
  cmd->add_option("--seed", a.config.seed, "seed of the random prompts (default 1)");
  cmd->add_flag("--json", a.json, "one JSON object per concurrency level");
  cmd->callback([] { run(a); });
}

}  // namespace lumen::cli
