// `lumen bench`'s options, shared by its two halves: cmd_bench.cpp (parsing, validation, the
// engine measurements: --batch, --cached-prefix, speculation, --verify-cost) and
// bench_tests.cpp (llama-bench's pp/tg tests on one sequence, as a table).
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "diagnostics/bench_table.h"
#include "engine_options.h"
#include "model_options.h"

namespace lumen {
struct RooflineMeasurement;
}

namespace lumen::cli {

struct BenchArgs {
  ModelArgs model;  // its n_threads is set per -t value
  // Lists, as llama-bench: a pp test per -p > 0 and a tg test per -n > 0, for each -t and -d.
  std::vector<int64_t> n_prompts{512};
  std::vector<int64_t> n_gens{128};
  std::vector<int64_t> n_depths{0};
  std::vector<int> threads;  // -t; empty: all cores
  // The one -p / -n / -t of the engine measurements (the lists' only values).
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int n_threads = 0;
  int n_reps = 3;
  bool json = false;     // --json, or -o json / jsonl
  std::string output;    // -o as given
  BenchFormat format = BenchFormat::Markdown;
  bool remeasure = false;
  std::string plot;
  std::vector<int64_t> batches;  // --batch: through the engine, this many sequences at once
  int64_t cached_prefix = 0;     // --cached-prefix: TTFT with this many prompt tokens cached
  std::string prompt;            // --prompt: the text speculative decoding continues
  bool verify_cost = false;      // --verify-cost: a pass over k + 1 tokens against a 1-token step
  bool profile = false;          // --profile: each pp/tg test's time per forward step
  EngineArgs engine;
};

// Progress on stderr: one self-overwriting line on a terminal, a line per phase otherwise.
class BenchProgress {
 public:
  BenchProgress() : tty_(isatty(fileno(stderr)) != 0) {}
  // `what` ("pp512 rep 1/3: prefill") at done of total tokens.
  void phase(const std::string& what, int64_t done, int64_t total) {
    if (tty_) {
      fmt::print(stderr, "\r\x1b[Kbench: {} {}/{} tokens", what, done, total);
      std::fflush(stderr);
    } else if (done == 0) {
      fmt::print(stderr, "bench: {} ({} tokens)\n", what, total);
    }
  }
  void line(const std::string& s) {
    if (tty_) fmt::print(stderr, "\r\x1b[K");
    fmt::print(stderr, "bench: {}\n", s);
  }
  void done() {
    if (tty_) fmt::print(stderr, "\r\x1b[K");
    std::fflush(stderr);
  }

 private:
  bool tty_;
};

// The tests, streamed in a.format as each finishes. `machines` holds the roofline of each
// a.threads value, in order.
void run_bench_tests(const BenchArgs& a, const std::string& model_path, const std::vector<RooflineMeasurement>& machines);

// Writes `text` to `path` through a temporary file (never a half-written plot).
void write_text_file(const std::string& path, const std::string& text);

}  // namespace lumen::cli
