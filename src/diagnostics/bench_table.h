// `lumen bench`'s results as llama-bench prints them, so the two can be held side by side line
// by line: one row per test ("pp512", "tg128", "pp512 @ d4096"), t/s as the mean ± standard
// deviation over repetitions, in a markdown table (the default), CSV, a JSON array or JSON lines,
// with llama-bench's field names (n_prompt, n_gen, n_depth, avg_ts, stddev_ts, samples_ts, ...).
// Each row adds what llama-bench does not report: the median, the latency the test sets (TTFT
// for pp, inter-token latency for tg), the rate against the machine's roofline and its verdict,
// and the ceilings measured for that thread count.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lumen {

enum class BenchFormat { Markdown, Csv, Json, Jsonl };

// "md", "csv", "json", "jsonl"; nullopt for anything else.
std::optional<BenchFormat> parse_bench_format(const std::string& s);

struct BenchRow {
  // llama-bench's fields.
  std::string model_filename;
  std::string model_type;  // "llama 260K F32": architecture, size class, main weight type
  uint64_t model_size = 0;  // bytes of every tensor
  uint64_t model_n_params = 0;
  std::string backends = "CPU";
  std::string cpu_info;
  int n_threads = 0;
  int64_t n_batch = 0;
  std::string type_k, type_v;  // KV cache types, lower case as llama-bench ("f16", "q8_0")
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string test_time;  // ISO 8601, UTC
  std::vector<double> samples_ns;  // one per repetition: the test's time
  std::vector<double> samples_ts;  // tokens/s per repetition
  // lumen's.
  std::string isa;
  double ttft_ms = 0;                        // pp: median time to first token
  double itl_ms_p50 = 0, itl_ms_p99 = 0;     // tg: medians over repetitions
  double gb_s = 0, gflop_s = 0;              // achieved, at the median t/s
  double roofline_frac = 0;                  // of the bounding ceiling
  std::string bound;                         // "bandwidth" / "compute"
  std::string ceiling;                       // "DRAM", "int8", "fp32", "bf16"
  std::string verdict;                       // "decode: bandwidth-bound, 81% of 54.3 GB/s"
  double dram_gb_s = 0, fp32_gflop_s = 0, int8_gop_s = 0;  // this thread count's ceilings
  bool ceilings_from_cache = false;
  nlohmann::json extra = nlohmann::json::object();  // further figures, JSON only

  std::string test() const;  // "pp512", "tg128", "pp512 @ d4096"
  double avg_ts() const;
  double stddev_ts() const;  // sample standard deviation (n - 1), 0 for one repetition
  double median_ts() const;
};

// "1.10 GiB", "1.10 B" / "292.1 K": llama-bench's size and parameter-count styles.
std::string format_model_size(uint64_t bytes);
std::string format_n_params(uint64_t n);
// "llama 1B Q8_0": llama.cpp's model type, from the parameter count.
std::string model_type_label(const std::string& arch, uint64_t n_params, const std::string& main_type);

// Markdown: the header (two lines) and one line per row; after the table, a verdict line per row.
std::string bench_md_header();
std::string bench_md_row(const BenchRow& r);
std::string bench_md_verdicts(const std::vector<BenchRow>& rows);
// CSV: a header line and one line per row (strings quoted, samples joined by ';').
std::string bench_csv_header();
std::string bench_csv_row(const BenchRow& r);
// JSON: one object per row; `-o json` prints them as one array, `-o jsonl` one per line.
nlohmann::json bench_row_json(const BenchRow& r);

}  // namespace lumen
