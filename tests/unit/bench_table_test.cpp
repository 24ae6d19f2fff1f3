// lumen bench's llama-bench-style rows: test labels, mean ± sample stddev, and the md / csv /
// json forms with llama-bench's field names.
#include "diagnostics/bench_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace lumen {
namespace {

BenchRow row() {
  BenchRow r;
  r.model_filename = "/m/tiny, \"quoted\".gguf";
  r.model_type = model_type_label("llama", 1'100'048'384, "Q8_0");
  r.model_size = 1'170'000'000;
  r.model_n_params = 1'100'048'384;
  r.n_threads = 2;
  r.n_batch = 512;
  r.type_k = r.type_v = "f16";
  r.n_gen = 128;
  r.n_depth = 4096;
  r.samples_ts = {40.0, 42.0, 44.0};
  r.samples_ns = {3.2e9, 3.05e9, 2.9e9};
  r.itl_ms_p50 = 23.8;
  r.itl_ms_p99 = 25.1;
  r.bound = "bandwidth";
  r.ceiling = "DRAM";
  r.gb_s = 49.7;
  r.roofline_frac = 0.81;
  r.verdict = "decode: bandwidth-bound, 81% of 61.4 GB/s";
  return r;
}

TEST(BenchTable, LabelsAndStatistics) {
  BenchRow r = row();
  EXPECT_EQ(r.test(), "tg128 @ d4096");
  r.n_gen = 0, r.n_prompt = 512, r.n_depth = 0;
  EXPECT_EQ(r.test(), "pp512");
  EXPECT_DOUBLE_EQ(r.avg_ts(), 42.0);
  EXPECT_DOUBLE_EQ(r.stddev_ts(), 2.0);  // sample standard deviation, as llama-bench
  EXPECT_DOUBLE_EQ(r.median_ts(), 42.0);
  r.samples_ts = {10.0};
  EXPECT_EQ(r.stddev_ts(), 0.0);
  EXPECT_EQ(model_type_label("llama", 292'800, "F32"), "llama 293K F32");
  EXPECT_EQ(format_model_size(1'170'000'000), "1.09 GiB");
  EXPECT_EQ(format_n_params(1'100'048'384), "1.10 B");
  EXPECT_EQ(parse_bench_format("jsonl"), BenchFormat::Jsonl);
  EXPECT_FALSE(parse_bench_format("sql").has_value());
}

TEST(BenchTable, MarkdownRowHasLlamaBenchsColumnsFirst) {
  const std::string h = bench_md_header();
  EXPECT_EQ(h.rfind("| model | size | params | backend | threads | test | t/s |", 0), 0u) << h;
  const std::string line = bench_md_row(row());
  EXPECT_EQ(line, "| llama 1B Q8_0 | 1.09 GiB | 1.10 B | CPU | 2 | tg128 @ d4096 | 42.00 ± 2.00 | ITL 23.800 (25.100) | "
                  "49.7 GB/s | 81% DRAM |\n");
  // Same number of cells as the header.
  auto cells = [](const std::string& s) { return std::count(s.begin(), s.end(), '|'); };
  EXPECT_EQ(cells(line), cells(h.substr(0, h.find('\n'))));
}

TEST(BenchTable, CsvQuotesAndJsonFields) {
  const BenchRow r = row();
  const std::string header = bench_csv_header();
  const std::string line = bench_csv_row(r);
  // Quoted as RFC 4180: the file name holds a comma and quotes.
  EXPECT_NE(line.find(",\"/m/tiny, \"\"quoted\"\".gguf\","), std::string::npos) << line;
  EXPECT_NE(line.find(",3200000000 3050000000 2900000000,"), std::string::npos) << line;  // no comma: unquoted
  EXPECT_EQ(header.back(), '\n');
  const nlohmann::json j = bench_row_json(r);
  for (const char* k : {"model_filename", "model_type", "model_size", "model_n_params", "n_threads", "type_k", "type_v",
                        "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns",
                        "samples_ts", "median_ts", "itl_ms_p50", "roofline_frac", "verdict", "ceilings"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["avg_ns"], 3'050'000'000u);
  EXPECT_EQ(j["samples_ns"].size(), 3u);
  EXPECT_EQ(j["test"], "tg128 @ d4096");
}

}  // namespace
}  // namespace lumen
