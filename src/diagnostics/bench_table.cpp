#include "diagnostics/bench_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/stats.h"
#include "diagnostics/roofline_report.h"

namespace lumen {

std::optional<BenchFormat> parse_bench_format(const std::string& s) {
  if (s == "md") return BenchFormat::Markdown;
  if (s == "csv") return BenchFormat::Csv;
  if (s == "json") return BenchFormat::Json;
  if (s == "jsonl") return BenchFormat::Jsonl;
  return std::nullopt;
}

std::string BenchRow::test() const {
  std::string t;
  if (n_prompt > 0) t = fmt::format("pp{}", n_prompt);
  if (n_gen > 0) t += fmt::format("{}tg{}", t.empty() ? "" : "+", n_gen);
  if (n_depth > 0) t += fmt::format(" @ d{}", n_depth);
  return t;
}

namespace {

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

std::string md_cell(std::string s) {
  // A '|' inside a cell would split it.
  for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
  return s;
}

std::string joined(const std::vector<double>& v, const char* fmt_spec) {
  std::string o;
  for (size_t i = 0; i < v.size(); i++) o += (i ? " " : "") + fmt::format(fmt::runtime(fmt_spec), v[i]);
  return o;
}

}  // namespace

double BenchRow::avg_ts() const { return mean(samples_ts); }

double BenchRow::stddev_ts() const { return stddev(samples_ts); }

double BenchRow::median_ts() const { return median(samples_ts); }

std::string format_model_size(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} KiB", b / 1024.0);
}

std::string format_n_params(uint64_t n) {
  const double x = static_cast<double>(n);
  if (x >= 1e9) return fmt::format("{:.2f} B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f} M", x / 1e6);
  return fmt::format("{:.2f} K", x / 1e3);
}

std::string model_type_label(const std::string& arch, uint64_t n_params, const std::string& main_type) {
  const double x = static_cast<double>(n_params);
  std::string size;
  if (x >= 1e9) size = fmt::format("{:.0f}B", x / 1e9);
  else if (x >= 1e6) size = fmt::format("{:.0f}M", x / 1e6);
  else size = fmt::format("{:.0f}K", x / 1e3);
  return fmt::format("{} {} {}", arch, size, main_type);
}

std::string bench_md_header() {
  return "| model | size | params | backend | threads | test | t/s | latency ms | achieved | of roofline |\n"
         "| ----- | ---: | -----: | ------- | ------: | ---- | --: | ---------: | -------: | ----------: |\n";
}

std::string bench_md_row(const BenchRow& r) {
  // pp sets the time to first token, tg the inter-token latency (p50, p99 in brackets).
  std::string latency;
  if (r.n_gen > 0) latency = fmt::format("ITL {:.3f} ({:.3f})", r.itl_ms_p50, r.itl_ms_p99);
  else latency = fmt::format("TTFT {:.2f}", r.ttft_ms);
  const std::string achieved = r.bound == "bandwidth" ? fmt::format("{} GB/s", format_3sig(r.gb_s))
                                                      : fmt::format("{} GFLOP/s", format_3sig(r.gflop_s));
  return fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} | {:.0f}% {} |\n", md_cell(r.model_type),
                     format_model_size(r.model_size), format_n_params(r.model_n_params), md_cell(r.backends),
                     r.n_threads, r.test(), r.avg_ts(), r.stddev_ts(), latency, achieved, 100 * r.roofline_frac,
                     r.ceiling);
}

std::string bench_md_verdicts(const std::vector<BenchRow>& rows) {
  std::string o;
  size_t w = 4;
  for (const BenchRow& r : rows) w = std::max(w, r.test().size() + 4 + std::to_string(r.n_threads).size());
  for (const BenchRow& r : rows)
    o += fmt::format("verdict   {:<{}}  {}\n", fmt::format("{} -t {}", r.test(), r.n_threads), w, r.verdict);
  return o;
}

namespace {

// llama-bench's fields this engine has (in its order), then lumen's.
const char* const kCsvFields[] = {
    "cpu_info", "backends", "model_filename", "model_type", "model_size", "model_n_params", "n_batch",
    "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns",
    "avg_ts", "stddev_ts", "samples_ns", "samples_ts", "test", "isa", "median_ts", "ttft_ms", "itl_ms_p50",
    "itl_ms_p99", "gb_s", "gflop_s", "roofline_frac", "bound", "ceiling", "verdict"};

}  // namespace

std::string bench_csv_header() {
  std::string o;
  for (const char* f : kCsvFields) o += (o.empty() ? "" : ",") + std::string(f);
  return o + "\n";
}

std::string bench_csv_row(const BenchRow& r) {
  const nlohmann::json j = bench_row_json(r);
  std::string o;
  for (const char* f : kCsvFields) {
    if (!o.empty()) o += ",";
    const nlohmann::json& v = j.at(f);
    if (v.is_string()) o += csv_field(v.get<std::string>());
    else if (std::string(f) == "samples_ns") o += csv_field(joined(r.samples_ns, "{:.0f}"));
    else if (std::string(f) == "samples_ts") o += csv_field(joined(r.samples_ts, "{:.6g}"));
    else o += v.dump();
  }
  return o + "\n";
}

nlohmann::json bench_row_json(const BenchRow& r) {
  nlohmann::json j;
  j["cpu_info"] = r.cpu_info;
  j["backends"] = r.backends;
  j["model_filename"] = r.model_filename;
  j["model_type"] = r.model_type;
  j["model_size"] = r.model_size;
  j["model_n_params"] = r.model_n_params;
  j["n_batch"] = r.n_batch;
  j["n_threads"] = r.n_threads;
  j["type_k"] = r.type_k;
  j["type_v"] = r.type_v;
  j["n_prompt"] = r.n_prompt;
  j["n_gen"] = r.n_gen;
  j["n_depth"] = r.n_depth;
  j["test_time"] = r.test_time;
  j["avg_ns"] = static_cast<uint64_t>(std::llround(mean(r.samples_ns)));
  j["stddev_ns"] = static_cast<uint64_t>(std::llround(stddev(r.samples_ns)));
  j["avg_ts"] = r.avg_ts();
  j["stddev_ts"] = r.stddev_ts();
  nlohmann::json ns = nlohmann::json::array();
  for (double x : r.samples_ns) ns.push_back(static_cast<uint64_t>(std::llround(x)));
  j["samples_ns"] = ns;
  j["samples_ts"] = r.samples_ts;
  j["test"] = r.test();
  j["isa"] = r.isa;
  j["median_ts"] = r.median_ts();
  j["ttft_ms"] = r.ttft_ms;
  j["itl_ms_p50"] = r.itl_ms_p50;
  j["itl_ms_p99"] = r.itl_ms_p99;
  j["gb_s"] = r.gb_s;
  j["gflop_s"] = r.gflop_s;
  j["roofline_frac"] = r.roofline_frac;
  j["bound"] = r.bound;
  j["ceiling"] = r.ceiling;
  j["verdict"] = r.verdict;
  j["ceilings"] = {{"dram_read_gb_s", r.dram_gb_s},
                   {"fp32_gflop_s", r.fp32_gflop_s},
                   {"int8_gop_s", r.int8_gop_s},
                   {"from_cache", r.ceilings_from_cache}};
  for (const auto& [k, v] : r.extra.items()) j[k] = v;
  return j;
}

}  // namespace lumen
