// `lumen bench`: prefill and decode speed, TTFT and inter-token latency (medians over
// repetitions; diagnostics/benchmark.h says what is timed), judged against the machine's roofline
// (diagnostics/roofline_report.h), as text, JSON, and optionally an SVG roofline chart.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "diagnostics/batch_benchmark.h"
#include "diagnostics/benchmark.h"
#include "diagnostics/roofline_report.h"
#include "diagnostics/spec_benchmark.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/roofline.h"
#include "model/model.h"
#include "engine_options.h"
#include "model_options.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

namespace {

struct BenchArgs {
  ModelArgs model;
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int n_reps = 3;
  bool json = false;
  bool remeasure = false;
  std::string plot;
  std::vector<int64_t> batches;  // --batch: through the engine, this many sequences at once
  int64_t cached_prefix = 0;     // --cached-prefix: TTFT with this many prompt tokens cached
  std::string prompt;            // --prompt: the text speculative decoding continues
  bool verify_cost = false;      // --verify-cost: a pass over k + 1 tokens against a 1-token step
  EngineArgs engine;
};

// Progress on stderr: one self-overwriting line on a terminal, a line per phase otherwise.
class Progress {
 public:
  Progress() : tty_(isatty(fileno(stderr)) != 0) {}
  void phase(const BenchPhase& p) {
    if (p.result != nullptr) {
      line(fmt::format("rep {}/{}: prefill {:.1f} tok/s, decode {:.1f} tok/s", p.rep, p.n_reps, p.result->prefill_tok_s,
                       p.result->decode_tok_s));
      return;
    }
    std::string what = p.phase == "warm-up" ? "warm-up" : fmt::format("rep {}/{}: {}", p.rep, p.n_reps, p.phase);
    if (tty_) {
      fmt::print(stderr, "\r\x1b[Kbench: {} {}/{} tokens", what, p.done, p.total);
      std::fflush(stderr);
    } else if (p.done == 0) {
      fmt::print(stderr, "bench: {} ({} tokens)\n", what, p.total);
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

std::string name_of(const GgufFile& f, const std::string& path) {
  if (auto n = f.get_string("general.name"); n && !n->empty()) return std::string(*n);
  return std::filesystem::path(path).filename().string();
}

nlohmann::json ceilings_json(const RooflineMeasurement& machine) {
  return {{"dram_read_gb_s", machine.dram_read_gbps},
          {"fp32_gflop_s", machine.fp32_gflops},
          {"int8_gop_s", machine.int8_gops},
          {"cpu", machine.cpu_brand},
          {"from_cache", machine.from_cache}};
}

// --batch / --cached-prefix: the engine's throughput and prefix-cache TTFT.
void run_engine_bench(const BenchArgs& a, LoadedModel& m, const RooflineMeasurement& machine, int n_threads,
                      const std::string& path) {
  Model& model = *m.model;
  BatchBenchOptions o;
  o.batches = a.batches;
  o.n_prompt = a.n_prompt;
  o.n_gen = a.n_gen;
  o.bos = m.tokenizer->bos_id();
  if (o.bos >= model.config().n_vocab) o.bos = -1;
  o.engine = a.engine.to_config(0);
  ModelCost cost = model_cost(*m.file, model.config(), model.weight_bytes(), o.engine.kv_type_k, o.engine.kv_type_v,
                              a.model.f16_as_bf16);
  const double weights_per_token = cost.weight_bytes_per_token;
  if (!a.json) {
    fmt::print("model     {} ({})\n", path, cost.type_mix_string());
    fmt::print("setup     {} threads, {} kernels, {} KV cache, blocks of {}, step budget {} tokens; p={} n={}\n", n_threads,
               isa_name(active_isa()), kv_types_name(o.engine.kv_type_k, o.engine.kv_type_v), o.engine.block_size, o.engine.max_batch_tokens,
               a.n_prompt, a.n_gen);
    fmt::print("machine   DRAM read {} GB/s, FP32 FMA {} GFLOP/s{} ({})\n\n", format_3sig(machine.dram_read_gbps),
               format_3sig(machine.fp32_gflops),
               machine.int8_gops > 0 ? fmt::format(", int8 VNNI {} GOP/s", format_3sig(machine.int8_gops)) : "",
               machine.from_cache ? "cached roofline" : "measured now");
    if (!o.batches.empty())
      fmt::print("{:>5} {:>13} {:>9} {:>10} {:>10} {:>10} {:>13} {:>13}  {}\n", "batch", "decode tok/s", "vs first",
                 "ITL p50 ms", "ITL p99 ms", "TTFT p50", "KV blocks", "unused slots", "verdict");
  }
  double base = 0;
  auto on_result = [&](const BatchBenchResult& r) {
    // Per decoded token the weights are read once per step, shared by the batch's tokens.
    ModelCost c = cost;
    c.weight_bytes_per_token = weights_per_token / static_cast<double>(r.batch);
    const BenchShape shape{a.n_prompt, a.n_gen, model.n_batch()};
    const RooflineReport rr = analyze_roofline(c, shape, 0, r.decode_tok_s, machine);
    if (base == 0) base = r.decode_tok_s;  // the first size listed (usually 1)
    const double speedup = base > 0 ? r.decode_tok_s / base : 0;
    if (a.json) {
      nlohmann::json j;
      j["batch"] = r.batch;
      j["n_prompt"] = a.n_prompt;
      j["n_gen"] = a.n_gen;
      j["threads"] = n_threads;
      j["decode_tok_s"] = r.decode_tok_s;
      j["decode_tokens"] = r.decode_tokens;
      j["decode_vs_first"] = speedup;
      j["decode_ms"] = r.decode_ms;
      j["itl_ms_p50"] = r.itl_ms_p50;
      j["itl_ms_p99"] = r.itl_ms_p99;
      j["ttft_ms_p50"] = r.ttft_ms_p50;
      j["ttft_ms_max"] = r.ttft_ms_max;
      j["wall_ms"] = r.wall_ms;
      j["kv_blocks_used"] = r.blocks_used_peak;
      j["kv_blocks_total"] = r.blocks_total;
      j["kv_block_size"] = r.block_size;
      j["kv_type"] = kv_types_name(o.engine.kv_type_k, o.engine.kv_type_v);
      j["kv_type_k"] = std::string(type_name(o.engine.kv_type_k));
      j["kv_type_v"] = std::string(type_name(o.engine.kv_type_v));
      j["kv_bytes_per_token"] = r.kv_bytes_per_token;
      j["kv_memory_peak_bytes"] = r.blocks_used_peak * r.kv_bytes_per_block;
      j["kv_empty_block_frac"] = r.empty_block_frac;
      j["kv_unused_slot_frac"] = r.unused_slot_frac;
      j["preemptions"] = r.preemptions;
      j["steps"] = r.steps;
      j["engine_ms_per_step"] = {{"schedule", r.schedule_ms_per_step},
                                 {"forward", r.forward_ms_per_step},
                                 {"sample", r.sample_ms_per_step}};
      j["decode_gb_s"] = rr.decode.gb_s;
      j["decode_gflop_s"] = rr.decode.gflop_s;
      j["decode_roofline_frac"] = rr.decode.frac;
      j["decode_bound"] = rr.decode.bandwidth_bound ? "bandwidth" : "compute";
      j["verdict"] = rr.decode.verdict;
      j["ceilings"] = ceilings_json(machine);
      fmt::print("{}\n", j.dump());
    } else {
      if (r.batch == o.batches.front() && r.block_size > 0)
        fmt::print("(KV cache: {} bytes per token, {:.2f} MiB per block of {} tokens)\n", r.kv_bytes_per_token,
                   static_cast<double>(r.kv_bytes_per_block) / (1 << 20), r.block_size);
      fmt::print("{:>5} {:>13.1f} {:>8.2f}x {:>10.2f} {:>10.2f} {:>10.1f} {:>6}/{:<6} {:>12.1f}%  {}\n", r.batch,
                 r.decode_tok_s, speedup, r.itl_ms_p50, r.itl_ms_p99, r.ttft_ms_p50, r.blocks_used_peak,
                 r.blocks_total, 100.0 * r.unused_slot_frac, rr.decode.verdict);
    }
    std::fflush(stdout);
  };
  if (!o.batches.empty()) run_batch_benchmark(model, *m.tokenizer, o, on_result);
  if (a.cached_prefix > 0) {
    const PrefixTtftResult p = measure_prefix_ttft(model, *m.tokenizer, o, a.cached_prefix, a.n_reps);
    if (a.json) {
      nlohmann::json j;
      j["cached_prefix"] = p.n_prefix;
      j["n_prompt"] = p.n_prompt;
      j["cached_tokens"] = p.cached_tokens;
      j["ttft_cold_ms"] = p.cold_ttft_ms;
      j["ttft_cached_ms"] = p.cached_ttft_ms;
      j["ttft_ratio"] = p.cached_ttft_ms > 0 ? p.cold_ttft_ms / p.cached_ttft_ms : 0.0;
      fmt::print("{}\n", j.dump());
    } else {
      fmt::print("\nprefix    a {}-token prompt: TTFT cold {:.2f} ms, with its first {} tokens cached ({} found) {:.2f} ms: "
                 "{:.1f}x lower (medians of {})\n",
                 p.n_prompt, p.cold_ttft_ms, p.n_prefix, p.cached_tokens, p.cached_ttft_ms,
                 p.cached_ttft_ms > 0 ? p.cold_ttft_ms / p.cached_ttft_ms : 0.0, a.n_reps);
    }
  }
}

void run_verify_cost(const BenchArgs& a, LoadedModel& m, const std::string& path, int n_threads);
void run_speculative_bench(const BenchArgs& a, LoadedModel& m, const std::string& path, int n_threads);

void run_bench(const BenchArgs& a) {
  if (a.n_prompt < 1) usage_fail("-p/--n-prompt must be at least 1");
  if (a.n_gen < 0) usage_fail("-n/--n-gen must not be negative");
  if (a.n_reps < 1) usage_fail("-r/--repetitions must be at least 1");
  if (a.cached_prefix < 0) usage_fail("--cached-prefix must be at least 1 token, got {}", a.cached_prefix);
  for (int64_t b : a.batches)
    if (b < 1) usage_fail("--batch sizes must be at least 1, got {}", b);
  const int n_threads =
      a.model.n_threads > 0 ? a.model.n_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Progress progress;
  const std::string path = a.model.resolved_model_path();
  if (!std::filesystem::exists(path)) fail("{}: no such model file (give one with -m or $LUMEN_MODEL)", path);
  // Every context bench uses is sized from -p and -n (and the engine's needs); a -c that changes
  // nothing must not pass as if it did.
  if (a.model.n_ctx != 0)
    usage_fail("bench: -c/--ctx-size has no effect: each measurement's context is what -p and -n need (here {})",
               a.n_prompt + a.n_gen);
  if (!a.plot.empty()) {
    // Fail now, not after minutes of measuring, when the plot cannot be written.
    if (std::filesystem::is_directory(a.plot)) fail("--plot {}: is a directory (give the SVG file's name)", a.plot);
    std::ofstream probe(a.plot + ".tmp", std::ios::binary | std::ios::trunc);
    if (!probe) fail("--plot {}: cannot write the plot", a.plot);
    probe.close();
    std::remove((a.plot + ".tmp").c_str());
  }

  // The machine's ceilings first, before the model takes memory (cached after the first run).
  const Isa isa = active_isa();
  {
    bool cached = false;
    try {
      cached = read_roofline_cache(roofline_cache_path(), cpu_features().brand, n_threads, isa).has_value();
    } catch (const Error&) {
    }
    if (!cached && !a.remeasure) progress.line(fmt::format("measuring this machine's roofline for {} threads (once; cached)", n_threads));
  }
  RooflineMeasurement machine;
  if (a.remeasure) {
    progress.line(fmt::format("measuring this machine's roofline for {} threads", n_threads));
    machine = measure_roofline(n_threads);
    try {
      write_roofline_cache(roofline_cache_path(), machine);
    } catch (const Error& e) {
      machine.cache_error = e.what();
    }
  } else {
    machine = load_or_measure_roofline(n_threads);
  }
  if (!machine.cache_error.empty()) progress.line("roofline cache not written: " + machine.cache_error);

  ModelArgs margs = a.model;
  margs.n_threads = n_threads;
  margs.model_path = path;
  if (!a.batches.empty() || a.cached_prefix > 0) margs.n_batch = std::max(margs.n_batch, a.engine.max_batch_tokens);
  progress.line(fmt::format("loading {}", path));
  auto m = load_model(margs);
  Model& model = *m->model;
  const ModelConfig& cfg = model.config();
  if (a.n_prompt + a.n_gen > cfg.n_ctx_train)
    progress.line(fmt::format("note: {} + {} positions exceed the model's training context of {}", a.n_prompt,
                              a.n_gen, cfg.n_ctx_train));

  if (!a.batches.empty() || a.cached_prefix > 0) {
    run_engine_bench(a, *m, machine, n_threads, path);
    return;
  }
  if (a.verify_cost) {
    run_verify_cost(a, *m, path, n_threads);
    return;
  }
  if (!a.engine.draft_model.empty() || a.engine.spec_ngram > 0) {
    run_speculative_bench(a, *m, path, n_threads);
    return;
  }

  BenchOptions opt;
  opt.n_prompt = a.n_prompt;
  opt.n_gen = a.n_gen;
  opt.n_reps = a.n_reps;
  opt.kv_type_k = a.engine.kv_types.k_type();
  opt.kv_type_v = a.engine.kv_types.v_type();
  opt.bos = m->tokenizer->bos_id();
  if (opt.bos >= cfg.n_vocab) opt.bos = -1;
  const BenchResult res = run_benchmark(model, opt, [&](const BenchPhase& p) { progress.phase(p); });
  progress.done();

  const ModelCost cost = model_cost(*m->file, cfg, model.weight_bytes(), opt.kv_type_k, opt.kv_type_v, margs.f16_as_bf16);
  const BenchShape shape{a.n_prompt, a.n_gen, model.n_batch()};
  const RooflineReport rr = analyze_roofline(cost, shape, res.prefill_tok_s, res.decode_tok_s, machine);
  const std::string model_name = name_of(*m->file, path);
  double n_params = 0;
  for (const auto& t : m->file->tensors()) n_params += static_cast<double>(t.n_elements());

  if (!a.plot.empty()) {
    const std::string title = fmt::format("Roofline: {} ({}), {} threads, {}",
                                          std::filesystem::path(path).filename().string(),
                                          cost.type_mix.empty() ? "?" : type_name(cost.type_mix[0].type), n_threads,
                                          isa_name(isa));
    const std::string subtitle =
        fmt::format("{}: {}; prefill p={}, decode n={}, medians of {}\n{}\n{}", model_name, cost.type_mix_string(),
                    a.n_prompt, a.n_gen, a.n_reps, rr.decode.verdict, rr.prefill.verdict);
    write_text_file(a.plot, roofline_svg(rr, title, subtitle));
  }

  if (a.json) {
    nlohmann::json j;
    j["model"] = path;
    j["model_name"] = model_name;
    j["arch"] = cfg.arch;
    j["n_params"] = n_params;
    nlohmann::json mix = nlohmann::json::object();
    for (const TypeShare& t : cost.type_mix)
      mix[std::string(type_name(t.type))] = {{"tensors", t.n_tensors}, {"bytes", t.bytes}};
    j["type_mix"] = mix;
    j["threads"] = n_threads;
    j["isa"] = isa_name(isa);
    j["n_batch"] = model.n_batch();
    j["kv_type"] = kv_types_name(opt.kv_type_k, opt.kv_type_v);
    j["kv_type_k"] = std::string(type_name(opt.kv_type_k));
    j["kv_type_v"] = std::string(type_name(opt.kv_type_v));
    j["n_prompt"] = a.n_prompt;
    j["n_gen"] = a.n_gen;
    j["reps"] = a.n_reps;
    j["prefill_tok_s"] = res.prefill_tok_s;
    j["prefill_ms"] = res.prefill_ms;
    j["decode_tok_s"] = res.decode_tok_s;
    j["decode_ms"] = res.decode_ms;
    j["ttft_ms"] = res.ttft_ms;
    j["itl_ms_p50"] = res.itl_ms_p50;
    j["itl_ms_p99"] = res.itl_ms_p99;
    j["decode_bytes_per_token"] = rr.decode.bytes;
    j["decode_kv_bytes_per_token"] = rr.decode_kv_bytes_per_token;
    j["decode_mean_ctx"] = rr.decode_mean_ctx;
    j["decode_gb_s"] = rr.decode.gb_s;
    j["decode_roofline_frac"] = rr.decode.frac;
    j["decode_gflop_s"] = rr.decode.gflop_s;
    j["decode_bound"] = rr.decode.bandwidth_bound ? "bandwidth" : "compute";
    j["prefill_flops"] = rr.prefill.flops;
    j["prefill_attention_flops"] = rr.prefill_attn_flops;
    j["prefill_gflop_s"] = rr.prefill.gflop_s;
    j["prefill_roofline_frac"] = rr.prefill.frac;
    j["prefill_bound"] = rr.prefill.bandwidth_bound ? "bandwidth" : "compute";
    j["prefill_compute"] = rr.compute_kind;
    j["prefill_compute_peak_gflop_s"] = rr.compute_peak;
    j["ceilings"] = ceilings_json(machine);
    j["verdict"] = {{"decode", rr.decode.verdict}, {"prefill", rr.prefill.verdict}};
    nlohmann::json per_rep = nlohmann::json::array();
    for (const BenchRep& r : res.reps)
      per_rep.push_back({{"prefill_tok_s", r.prefill_tok_s},
                         {"prefill_ms", r.prefill_ms},
                         {"ttft_ms", r.ttft_ms},
                         {"decode_tok_s", r.decode_tok_s},
                         {"decode_ms", r.decode_ms},
                         {"itl_ms_p50", r.itl_ms_p50},
                         {"itl_ms_p99", r.itl_ms_p99}});
    j["per_rep"] = per_rep;
    if (!a.plot.empty()) j["plot"] = a.plot;
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }

  const std::string params = n_params >= 1e9 ? fmt::format("{:.2f} B", n_params / 1e9)
                             : n_params >= 1e6 ? fmt::format("{:.1f} M", n_params / 1e6)
                                               : fmt::format("{:.1f} K", n_params / 1e3);
  fmt::print("model     {} ({}, {} parameters): {}\n", path, cfg.arch, params, model_name);
  fmt::print("weights   {}\n", cost.type_mix_string());
  fmt::print("setup     {} threads, {} kernels, batch {}, {} KV cache; p={} n={}, medians of {} reps (+1 warm-up)\n",
             n_threads, isa_name(isa), model.n_batch(), kv_types_name(opt.kv_type_k, opt.kv_type_v), a.n_prompt, a.n_gen, a.n_reps);
  fmt::print("machine   DRAM read {} GB/s, FP32 FMA {} GFLOP/s{} ({})\n", format_3sig(machine.dram_read_gbps),
             format_3sig(machine.fp32_gflops),
             machine.int8_gops > 0 ? fmt::format(", int8 VNNI {} GOP/s", format_3sig(machine.int8_gops)) : "",
             machine.from_cache ? "cached roofline" : "measured now");
  fmt::print("\n");
  fmt::print("prefill   {:9.1f} tok/s  {:10.2f} ms   TTFT {:.2f} ms\n", res.prefill_tok_s, res.prefill_ms, res.ttft_ms);
  fmt::print("decode    {:9.1f} tok/s  {:10.2f} ms   ITL p50 {:.3f} ms, p99 {:.3f} ms\n", res.decode_tok_s,
             res.decode_ms, res.itl_ms_p50, res.itl_ms_p99);
  fmt::print("\n");
  fmt::print("decode    {:.4g} MB/token (weights {:.4g} MB + KV {:.4g} MB at mean context {:.1f}) -> {} GB/s, {} GFLOP/s\n",
             rr.decode.bytes / 1e6, cost.weight_bytes_per_token / 1e6, rr.decode_kv_bytes_per_token / 1e6,
             rr.decode_mean_ctx, format_3sig(rr.decode.gb_s), format_3sig(rr.decode.gflop_s));
  fmt::print("prefill   {:.4g} GFLOP (attention {:.3g}) at {} FLOP/byte -> {} GFLOP/s ({} peak {} GFLOP/s)\n",
             rr.prefill.flops / 1e9, rr.prefill_attn_flops / 1e9, format_3sig(rr.prefill.intensity),
             format_3sig(rr.prefill.gflop_s), rr.compute_kind, format_3sig(rr.compute_peak));
  fmt::print("verdict   {}\n          {}\n", rr.decode.verdict, rr.prefill.verdict);
  fmt::print("\n{:<5} {:>14} {:>11} {:>14} {:>11} {:>11}\n", "rep", "prefill tok/s", "TTFT ms", "decode tok/s",
             "ITL p50 ms", "ITL p99 ms");
  for (size_t i = 0; i < res.reps.size(); i++) {
    const BenchRep& r = res.reps[i];
    fmt::print("{:<5} {:>14.1f} {:>11.2f} {:>14.1f} {:>11.3f} {:>11.3f}\n", i + 1, r.prefill_tok_s, r.ttft_ms,
               r.decode_tok_s, r.itl_ms_p50, r.itl_ms_p99);
  }
  if (!a.plot.empty()) fmt::print("\nplot      {}\n", a.plot);
}

// --verify-cost: one sequence at a -p token context; a pass over k + 1 tokens (k drafts) for
// k = 0..8, median of -r x 10 passes each.
void run_verify_cost(const BenchArgs& a, LoadedModel& m, const std::string& path, int n_threads) {
  const EngineConfig ec = a.engine.to_config(0);
  const auto costs = measure_verify_cost(*m.model, a.n_prompt, 8, std::max(1, a.n_reps) * 10, ec.kv_type_k, ec.kv_type_v);
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const VerifyCost& c : costs) rows.push_back({{"k", c.k}, {"tokens", c.k + 1}, {"ms", c.ms}, {"ratio", c.ratio}});
    fmt::print("{}\n", nlohmann::json{{"model", path}, {"threads", n_threads}, {"n_ctx", a.n_prompt}, {"verify_cost", rows}}.dump(2));
    return;
  }
  fmt::print("model     {}\nsetup     {} threads, {} kernels, context {} tokens, {} KV cache\n", path, n_threads,
             isa_name(active_isa()), a.n_prompt, kv_types_name(ec.kv_type_k, ec.kv_type_v));
  fmt::print("\n{:>3} {:>7} {:>10} {:>12}\n", "k", "tokens", "pass ms", "vs 1 token");
  for (const VerifyCost& c : costs) fmt::print("{:>3} {:>7} {:>10.3f} {:>11.2f}x\n", c.k, c.k + 1, c.ms, c.ratio);
}

// --draft-model / --spec-ngram: greedy decode of --prompt through the engine without and with
// speculation.
void run_speculative_bench(const BenchArgs& a, LoadedModel& m, const std::string& path, int n_threads) {
  std::unique_ptr<LoadedModel> draft;
  if (!a.engine.draft_model.empty()) draft = load_draft_model(a.engine.draft_model, m);
  EngineConfig ec = a.engine.to_config(0);
  if (draft) ec.draft_model = draft->model.get();
  const std::string text = a.prompt.empty() ? "Once upon a time" : a.prompt;
  const std::vector<int32_t> prompt = m.tokenizer->encode(text, true, false);
  const SpecBenchResult r = run_spec_benchmark(*m.model, *m.tokenizer, ec, prompt, a.n_gen, std::max(1, a.n_reps));
  const std::string proposer = draft ? "draft model " + a.engine.draft_model : fmt::format("n-gram lookup (n = {})", ec.spec_ngram);
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"model", path},
                                      {"threads", n_threads},
                                      {"proposer", proposer},
                                      {"spec_tokens", ec.spec_tokens},
                                      {"prompt_tokens", prompt.size()},
                                      {"n_gen", r.n_gen},
                                      {"decode_tok_s", r.plain_decode_tok_s},
                                      {"spec_decode_tok_s", r.spec_decode_tok_s},
                                      {"speedup", r.speedup},
                                      {"proposed", r.proposed},
                                      {"accepted", r.accepted},
                                      {"acceptance_rate", r.acceptance_rate},
                                      {"tokens_per_target_pass", r.tokens_per_target_pass},
                                      {"identical", r.identical}}
                             .dump(2));
    return;
  }
  fmt::print("model     {}\nproposer  {}, up to {} drafts per step\nsetup     {} threads, {} kernels; prompt {} tokens, "
             "{} generated (greedy), medians of {}\n",
             path, proposer, ec.spec_tokens, n_threads, isa_name(active_isa()), prompt.size(), r.n_gen, std::max(1, a.n_reps));
  fmt::print("decode    {:.1f} tok/s without speculation, {:.1f} tok/s with: {:.2f}x\n", r.plain_decode_tok_s,
             r.spec_decode_tok_s, r.speedup);
  fmt::print("drafts    {} proposed, {} accepted ({:.1f}%), {:.2f} tokens per target pass; outputs {}\n", r.proposed,
             r.accepted, 100.0 * r.acceptance_rate, r.tokens_per_target_pass, r.identical ? "identical" : "DIFFER");
}

}  // namespace

void register_bench(CLI::App& app) {
  static BenchArgs a;
  auto* cmd = app.add_subcommand("bench", "measure prefill/decode speed, TTFT and ITL against the machine's roofline");
  a.model.add_to(cmd);
  cmd->add_option("-p,--n-prompt", a.n_prompt, "prompt tokens for the prefill phase (default 512)");
  cmd->add_option("-n,--n-gen", a.n_gen, "tokens decoded one at a time after the prompt (default 128)");
  cmd->add_option("-r,--repetitions", a.n_reps, "repetitions; medians are reported (default 3)");
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_option("--plot", a.plot, "write a roofline chart to this SVG file");
  cmd->add_option("--batch", a.batches, "through the engine: decode this many sequences together, e.g. 1,4,16,32")
      ->delimiter(',');
  cmd->add_option("--cached-prefix", a.cached_prefix,
                  "through the engine: TTFT of a prompt whose first N tokens are in the prefix cache, against cold");
  a.engine.add_to(cmd, /*with_parallel=*/false);
  cmd->add_option("--prompt", a.prompt, "with --draft-model or --spec-ngram: the text to continue (default 'Once upon a time')");
  cmd->add_flag("--verify-cost", a.verify_cost,
                "time one pass over k + 1 tokens of a sequence at a -p token context against a 1-token step, k = 0..8");
  cmd->add_flag("--remeasure", a.remeasure,
                "measure the roofline again (on an idle machine) instead of using the cached one, and cache it");
  register_bench_serve(*cmd);
  cmd->callback([cmd] {
    if (cmd->got_subcommand("serve")) return;
    run_bench(a);
  });
}

}  // namespace lumen::cli
