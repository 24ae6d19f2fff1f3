// `lumen bench`'s llama-bench tests: for each -t and -d, a pp test per -p > 0 (a prompt after the
// depth) and a tg test per -n > 0 (decode after the depth), each on one sequence and -r times
// (diagnostics/benchmark.h says what is timed), judged against that thread count's roofline and
// printed as each finishes (diagnostics/bench_table.h: md, csv, json, jsonl).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>

#include "bench_args.h"
#include "core/error.h"
#include "diagnostics/benchmark.h"
#include "diagnostics/roofline_report.h"
#include "diagnostics/step_report.h"
#include "gguf/gguf_file.h"
#include "kernels/isa.h"
#include "kernels/roofline.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("{}: cannot write the plot", path);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail("{}: cannot write the plot", path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("{}: cannot write the plot: {}", path, ec.message());
  }
}

namespace {

std::string name_of(const GgufFile& f, const std::string& path) {
  if (auto n = f.get_string("general.name"); n && !n->empty()) return std::string(*n);
  return std::filesystem::path(path).filename().string();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string machine_line(const RooflineMeasurement& m) {
  return fmt::format("-t {}: DRAM read {} GB/s, FP32 FMA {} GFLOP/s{} ({})", m.n_threads, format_3sig(m.dram_read_gbps),
                     format_3sig(m.fp32_gflops),
                     m.int8_gops > 0 ? fmt::format(", int8 VNNI {} GOP/s", format_3sig(m.int8_gops)) : "",
                     m.from_cache ? "cached roofline" : "measured now");
}

// Prints rows as they come in the chosen format, and closes a JSON array even when a later
// test fails, so what was measured is never lost.
class RowPrinter {
 public:
  explicit RowPrinter(BenchFormat f) : f_(f) {}
  void row(const BenchRow& r) {
    switch (f_) {
      case BenchFormat::Markdown:
        if (rows_.empty()) fmt::print("{}", bench_md_header());
        fmt::print("{}", bench_md_row(r));
        break;
      case BenchFormat::Csv:
        if (rows_.empty()) fmt::print("{}", bench_csv_header());
        fmt::print("{}", bench_csv_row(r));
        break;
      case BenchFormat::Json:
        fmt::print("{}{}", rows_.empty() ? "[\n" : ",\n",
                   bench_row_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        break;
      case BenchFormat::Jsonl:
        fmt::print("{}\n", bench_row_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        break;
    }
    std::fflush(stdout);
    rows_.push_back(r);
  }
  // --profile: a test's table, printed after the verdicts (markdown only; JSON has it in the row).
  void profile(const std::string& table) { profiles_.push_back(table); }
  void finish() {
    if (f_ == BenchFormat::Json) fmt::print("{}]\n", rows_.empty() ? "[\n" : "\n");
    if (f_ == BenchFormat::Markdown && !rows_.empty()) fmt::print("\n{}", bench_md_verdicts(rows_));
    if (f_ == BenchFormat::Markdown)
      for (const std::string& p : profiles_) fmt::print("\n{}", p);
    std::fflush(stdout);
  }

 private:
  BenchFormat f_;
  std::vector<BenchRow> rows_;
  std::vector<std::string> profiles_;
};

struct Test {
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
};

}  // namespace

void run_bench_tests(const BenchArgs& a, const std::string& path, const std::vector<RooflineMeasurement>& machines) {
  BenchProgress progress;
  RowPrinter printer(a.format);
  const Isa isa = active_isa();
  std::optional<RooflineReport> plot_pp, plot_tg;  // --plot: the one pp and the one tg test
  std::string plot_model;

  try {
    for (size_t ti = 0; ti < a.threads.size(); ti++) {
      const int n_threads = a.threads[ti];
      const RooflineMeasurement& machine = machines[ti];
      ModelArgs margs = a.model;
      margs.n_threads = n_threads;
      margs.model_path = path;
      progress.line(fmt::format("loading {} for {} threads", path, n_threads));
      auto m = load_model(margs);
      Model& model = *m->model;
      const ModelConfig& cfg = model.config();
      const GgmlType kv_k = a.engine.kv_types.k_type(), kv_v = a.engine.kv_types.v_type();
      const ModelCost cost = model_cost(*m->file, cfg, model.weight_bytes(), kv_k, kv_v, margs.f16_as_bf16);
      uint64_t n_params = 0, n_bytes = 0;
      for (const auto& t : m->file->tensors()) {
        n_params += static_cast<uint64_t>(t.n_elements());
        n_bytes += t.n_bytes;
      }
      const std::string main_type = cost.type_mix.empty() ? "?" : std::string(type_name(cost.type_mix[0].type));
      plot_model = fmt::format("{}: {}", name_of(*m->file, path), cost.type_mix_string());
      if (ti == 0 && a.format == BenchFormat::Markdown) {
        fmt::print("model     {} ({}, {} parameters): {}\n", path, cfg.arch, format_n_params(n_params), name_of(*m->file, path));
        fmt::print("weights   {}\n", cost.type_mix_string());
        fmt::print("setup     {} kernels, batch {}, {} KV cache; {} reps per test (+1 warm-up): t/s is their mean ± "
                   "standard deviation, as llama-bench; rates and the roofline at the median\n",
                   isa_name(isa), model.n_batch(), kv_types_name(kv_k, kv_v), a.n_reps);
        for (const RooflineMeasurement& mm : machines) fmt::print("machine   {}\n", machine_line(mm));
        fmt::print("\n");
        std::fflush(stdout);
      }

      std::vector<Test> tests;
      for (int64_t d : a.n_depths) {
        for (int64_t p : a.n_prompts)
          if (p > 0) tests.push_back({p, 0, d});
        for (int64_t n : a.n_gens)
          if (n > 0) tests.push_back({0, n, d});
      }
      for (const Test& t : tests) {
        BenchRow row;
        row.n_prompt = t.n_prompt;
        row.n_gen = t.n_gen;
        row.n_depth = t.n_depth;
        const std::string label = row.test();
        if (t.n_depth + t.n_prompt + t.n_gen > cfg.n_ctx_train)
          progress.line(fmt::format("note: {} needs {} positions, more than the model's training context of {}", label,
                                    t.n_depth + t.n_prompt + t.n_gen, cfg.n_ctx_train));
        BenchOptions opt;
        opt.n_prompt = t.n_prompt;
        opt.n_gen = t.n_gen;
        opt.n_depth = t.n_depth;
        opt.n_reps = a.n_reps;
        opt.kv_type_k = kv_k;
        opt.kv_type_v = kv_v;
        opt.bos = m->tokenizer->bos_id();
        if (opt.bos >= cfg.n_vocab) opt.bos = -1;
        StepProfile steps;
        if (a.profile) opt.profile = &steps;
        // --remeasure: a decode test's DRAM bandwidth is measured again right before and right
        // after it, and its fraction is of the larger (the machine's minute, not the run's start).
        RooflineMeasurement test_machine = machine;
        const bool dram_each = a.remeasure && t.n_gen > 0;
        double dram_before = 0;
        if (dram_each) {
          progress.line(fmt::format("{} -t {}: DRAM read bandwidth before it", label, n_threads));
          dram_before = measure_dram_read(n_threads, isa);
        }
        const BenchResult res = run_benchmark(model, opt, [&](const BenchPhase& ph) {
          if (ph.result != nullptr) {
            const double ts = t.n_gen > 0 ? ph.result->decode_tok_s : ph.result->prefill_tok_s;
            progress.line(fmt::format("{} -t {} rep {}/{}: {:.1f} tok/s", label, n_threads, ph.rep, ph.n_reps, ts));
          } else {
            const std::string what = ph.phase == "warm-up" || ph.phase == "depth"
                                         ? fmt::format("{} -t {}: {}", label, n_threads, ph.phase)
                                         : fmt::format("{} -t {} rep {}/{}: {}", label, n_threads, ph.rep, ph.n_reps, ph.phase);
            progress.phase(what, ph.done, ph.total);
          }
        });
        progress.done();
        double dram_after = 0;
        if (dram_each) {
          dram_after = measure_dram_read(n_threads, isa);
          test_machine.dram_read_gbps = std::max(dram_before, dram_after);
          progress.line(fmt::format("{} -t {}: DRAM read {:.1f} GB/s before, {:.1f} after", label, n_threads,
                                    dram_before, dram_after));
        }

        row.model_filename = path;
        row.model_type = model_type_label(cfg.arch, n_params, main_type);
        row.model_size = n_bytes;
        row.model_n_params = n_params;
        row.cpu_info = machine.cpu_brand;
        row.n_threads = n_threads;
        row.n_batch = model.n_batch();
        row.type_k = lower(std::string(type_name(kv_k)));
        row.type_v = lower(std::string(type_name(kv_v)));
        row.test_time = utc_now();
        row.isa = isa_name(isa);
        for (const BenchRep& r : res.reps) {
          row.samples_ns.push_back(1e6 * (t.n_gen > 0 ? r.decode_ms : r.prefill_ms));
          row.samples_ts.push_back(t.n_gen > 0 ? r.decode_tok_s : r.prefill_tok_s);
        }
        row.ttft_ms = res.ttft_ms;
        row.itl_ms_p50 = res.itl_ms_p50;
        row.itl_ms_p99 = res.itl_ms_p99;
        const BenchShape shape{t.n_prompt, t.n_gen, model.n_batch(), t.n_depth};
        const RooflineReport rr = analyze_roofline(cost, shape, res.prefill_tok_s, res.decode_tok_s, test_machine);
        const PhasePoint& ph = t.n_gen > 0 ? rr.decode : rr.prefill;
        row.gb_s = ph.gb_s;
        row.gflop_s = ph.gflop_s;
        row.roofline_frac = ph.frac;
        row.bound = ph.bandwidth_bound ? "bandwidth" : "compute";
        row.ceiling = ph.bandwidth_bound ? "DRAM" : rr.compute_kind;
        row.verdict = ph.verdict;
        row.dram_gb_s = test_machine.dram_read_gbps;
        row.fp32_gflop_s = machine.fp32_gflops;
        row.int8_gop_s = machine.int8_gops;
        row.ceilings_from_cache = machine.from_cache;

        nlohmann::json& x = row.extra;
        x["phase"] = ph.name;
        x["model_name"] = name_of(*m->file, path);
        x["arch"] = cfg.arch;
        nlohmann::json mix = nlohmann::json::object();
        for (const TypeShare& s : cost.type_mix) mix[std::string(type_name(s.type))] = {{"tensors", s.n_tensors}, {"bytes", s.bytes}};
        x["type_mix"] = mix;
        x["kv_type"] = kv_types_name(kv_k, kv_v);
        x["reps"] = a.n_reps;
        x["bytes"] = ph.bytes;
        x["flops"] = ph.flops;
        x["intensity"] = ph.intensity;
        nlohmann::json per_rep = nlohmann::json::array();
        if (t.n_gen > 0) {
          x["decode_ms"] = res.decode_ms;
          x["kv_bytes_per_token"] = rr.decode_kv_bytes_per_token;
          x["mean_ctx"] = rr.decode_mean_ctx;
          for (const BenchRep& r : res.reps)
            per_rep.push_back({{"tok_s", r.decode_tok_s}, {"ms", r.decode_ms}, {"itl_ms_p50", r.itl_ms_p50}, {"itl_ms_p99", r.itl_ms_p99}});
        } else {
          x["prefill_ms"] = res.prefill_ms;
          x["attention_flops"] = rr.prefill_attn_flops;
          x["compute_kind"] = rr.compute_kind;
          x["compute_peak_gflop_s"] = rr.compute_peak;
          for (const BenchRep& r : res.reps)
            per_rep.push_back({{"tok_s", r.prefill_tok_s}, {"ms", r.prefill_ms}, {"ttft_ms", r.ttft_ms}});
        }
        x["per_rep"] = per_rep;
        if (a.profile) {
          // Per decoded token (tg) or per prompt (pp), over every repetition's timed time.
          double timed_ms = 0;
          for (const BenchRep& r : res.reps) timed_ms += t.n_gen > 0 ? r.decode_ms : r.prefill_ms;
          const double units = static_cast<double>(res.reps.size()) * static_cast<double>(t.n_gen > 0 ? t.n_gen : 1);
          const std::vector<StepRow> steps_rows = step_rows(steps, units, 1e-3 * timed_ms);
          x["profile"] = step_rows_json(steps_rows);
          const std::string title =
              fmt::format("profile   {} -t {}: ms per {}, means over {} reps; MB read: weights or K/V the step must read",
                          label, n_threads, t.n_gen > 0 ? "decoded token" : "prompt", res.reps.size());
          printer.profile(step_rows_md(title, steps_rows));
        }
        if (dram_each) x["dram_read_gb_s_around"] = {dram_before, dram_after};
        if (!a.plot.empty()) x["plot"] = a.plot;
        (t.n_gen > 0 ? plot_tg : plot_pp) = rr;
        printer.row(row);
      }
    }
  } catch (...) {
    printer.finish();
    throw;
  }
  printer.finish();

  if (!a.plot.empty()) {
    // One chart: the pp test's prefill point and the tg test's decode point (either may be absent).
    RooflineReport rr = plot_tg ? *plot_tg : *plot_pp;
    if (plot_pp) rr.prefill = plot_pp->prefill, rr.prefill_attn_flops = plot_pp->prefill_attn_flops;
    const int64_t p = plot_pp ? a.n_prompts[0] : 0, n = plot_tg ? a.n_gens[0] : 0;
    const std::string title = fmt::format("Roofline: {}, {} threads, {}", std::filesystem::path(path).filename().string(),
                                          a.threads[0], isa_name(isa));
    const std::string depth = a.n_depths[0] > 0 ? fmt::format(" after {} context tokens", a.n_depths[0]) : "";
    const std::string subtitle = fmt::format("{}; pp{}, tg{}{}, medians of {}\n{}\n{}", plot_model, p, n, depth, a.n_reps,
                                             plot_tg ? rr.decode.verdict : "decode: not measured",
                                             plot_pp ? rr.prefill.verdict : "prefill: not measured");
    write_text_file(a.plot, roofline_svg(rr, title, subtitle));
    if (a.format == BenchFormat::Markdown) fmt::print("\nplot      {}\n", a.plot);
  }
}

}  // namespace lumen::cli
