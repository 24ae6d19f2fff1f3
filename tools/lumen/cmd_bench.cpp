// `lumen bench`: its options, their checks (all before any measuring), the machine's roofline
// for each -t, then either llama-bench's pp/tg tests (bench_tests.cpp) or one of the engine
// measurements here: --batch, --cached-prefix, speculative decoding, --verify-cost.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_args.h"
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

std::string list_str(const std::vector<int64_t>& v) {
  std::string o;
  for (int64_t x : v) o += (o.empty() ? "" : ",") + std::to_string(x);
  return o;
}

// Every check before any measuring: a mistake must not cost minutes first.
void check_bench_args(BenchArgs& a) {
  if (a.n_reps < 1) usage_fail("-r/--repetitions must be at least 1");
  if (a.cached_prefix < 0) usage_fail("--cached-prefix must be at least 1 token, got {}", a.cached_prefix);
  for (int64_t p : a.n_prompts)
    if (p < 0) usage_fail("-p/--n-prompt must not be negative, got {}", p);
  for (int64_t n : a.n_gens)
    if (n < 0) usage_fail("-n/--n-gen must not be negative, got {}", n);
  for (int64_t d : a.n_depths)
    if (d < 0) usage_fail("-d/--n-depth must not be negative, got {}", d);
  for (int t : a.threads)
    if (t < 0) usage_fail("-t/--threads must not be negative, got {}", t);
  if (a.threads.empty()) a.threads.push_back(0);
  for (int& t : a.threads)
    if (t == 0) t = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  if (!a.output.empty()) {
    const auto f = parse_bench_format(a.output);
    if (!f) usage_fail("-o/--output must be md, csv, json or jsonl, got '{}'", a.output);
    if (a.json && *f != BenchFormat::Json) usage_fail("--json and -o {} ask for two formats: give one", a.output);
    a.format = *f;
  } else if (a.json) {
    a.format = BenchFormat::Json;
  }
  a.json = a.format == BenchFormat::Json || a.format == BenchFormat::Jsonl;
  // Every context bench uses is sized from -p, -n and -d (and the engine's needs); a -c that
  // changes nothing must not pass as if it did.
  if (a.model.n_ctx != 0)
    usage_fail("bench: -c/--ctx-size has no effect: each measurement's context is what -d, -p and -n need");

  const char* engine_mode = !a.batches.empty()                                     ? "--batch"
                            : a.cached_prefix > 0                                  ? "--cached-prefix"
                            : a.verify_cost                                        ? "--verify-cost"
                            : !a.engine.draft_model.empty()                        ? "--draft-model"
                            : a.engine.spec_ngram > 0                              ? "--spec-ngram"
                                                                                   : nullptr;
  if (engine_mode != nullptr) {
    if (a.n_prompts.size() != 1) usage_fail("{} takes one -p value, got {}", engine_mode, list_str(a.n_prompts));
    if (a.n_gens.size() != 1) usage_fail("{} takes one -n value, got {}", engine_mode, list_str(a.n_gens));
    if (a.threads.size() != 1) usage_fail("{} takes one -t value", engine_mode);
    if (a.n_depths != std::vector<int64_t>{0}) usage_fail("-d/--n-depth is for the pp/tg tests, not {}", engine_mode);
    if (a.format == BenchFormat::Csv) usage_fail("-o csv is for the pp/tg tests; {} prints text or JSON", engine_mode);
    if (!a.plot.empty()) usage_fail("--plot is for the pp/tg tests, not {}", engine_mode);
    if (a.profile) usage_fail("--profile is for the pp/tg tests, not {}", engine_mode);
    a.n_prompt = a.n_prompts[0];
    a.n_gen = a.n_gens[0];
    if (a.n_prompt < 1) usage_fail("-p/--n-prompt must be at least 1 with {}", engine_mode);
    return;
  }
  if (a.profile && a.format == BenchFormat::Csv)
    usage_fail("--profile prints a table per test (markdown) or a 'profile' array per row (-o json, jsonl), not CSV");
  bool any = false;
  for (int64_t p : a.n_prompts) any = any || p > 0;
  for (int64_t n : a.n_gens) any = any || n > 0;
  if (!any) usage_fail("nothing to measure: every -p and -n value is 0");
  if (!a.plot.empty()) {
    int n_pp = 0, n_tg = 0;
    for (int64_t p : a.n_prompts) n_pp += p > 0;
    for (int64_t n : a.n_gens) n_tg += n > 0;
    if (n_pp > 1 || n_tg > 1 || a.threads.size() != 1 || a.n_depths.size() != 1)
      usage_fail("--plot draws one pp and one tg test: give one value each of -p, -n, -t and -d");
    // Fail now, not after minutes of measuring, when the plot cannot be written.
    if (std::filesystem::is_directory(a.plot)) fail("--plot {}: is a directory (give the SVG file's name)", a.plot);
    std::ofstream probe(a.plot + ".tmp", std::ios::binary | std::ios::trunc);
    if (!probe) fail("--plot {}: cannot write the plot", a.plot);
    probe.close();
    std::remove((a.plot + ".tmp").c_str());
  }
}

void run_bench(BenchArgs a) {
  check_bench_args(a);
  BenchProgress progress;
  const std::string path = a.model.resolved_model_path();
  if (!std::filesystem::exists(path)) fail("{}: no such model file (give one with -m or $LUMEN_MODEL)", path);

  // The machine's ceilings first, before the model takes memory (cached after the first run).
  const Isa isa = active_isa();
  std::vector<RooflineMeasurement> machines;
  for (int n_threads : a.threads) {
    bool cached = false;
    try {
      cached = read_roofline_cache(roofline_cache_path(), cpu_features().brand, n_threads, isa).has_value();
    } catch (const Error&) {
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
      if (!cached) progress.line(fmt::format("measuring this machine's roofline for {} threads (once; cached)", n_threads));
      machine = load_or_measure_roofline(n_threads);
    }
    if (!machine.cache_error.empty()) progress.line("roofline cache not written: " + machine.cache_error);
    machines.push_back(machine);
  }

  if (a.batches.empty() && a.cached_prefix == 0 && !a.verify_cost && a.engine.draft_model.empty() &&
      a.engine.spec_ngram == 0) {
    run_bench_tests(a, path, machines);
    return;
  }

  const int n_threads = a.threads[0];
  ModelArgs margs = a.model;
  margs.n_threads = n_threads;
  margs.model_path = path;
  if (!a.batches.empty() || a.cached_prefix > 0) margs.n_batch = std::max(margs.n_batch, a.engine.max_batch_tokens);
  progress.line(fmt::format("loading {}", path));
  auto m = load_model(margs);
  const ModelConfig& cfg = m->model->config();
  if (a.n_prompt + a.n_gen > cfg.n_ctx_train)
    progress.line(fmt::format("note: {} + {} positions exceed the model's training context of {}", a.n_prompt,
                              a.n_gen, cfg.n_ctx_train));
  if (!a.batches.empty() || a.cached_prefix > 0) {
    run_engine_bench(a, *m, machines[0], n_threads, path);
  } else if (a.verify_cost) {
    run_verify_cost(a, *m, path, n_threads);
  } else {
    run_speculative_bench(a, *m, path, n_threads);
  }
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
  // Lists as llama-bench's: "-p 128,512" or "-p 128 -p 512".
  auto list = [&](const std::string& names, auto& v, const std::string& help) {
    cmd->remove_option(cmd->get_option_no_throw(names.substr(names.find(',') + 1)));
    cmd->add_option(names, v, help)->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  list("-t,--threads", a.threads, "threads; a list runs every test for each (default: all cores)");
  list("-p,--n-prompt", a.n_prompts, "a pp test per value: a prompt of that many tokens; 0: none (default 512)");
  list("-n,--n-gen", a.n_gens, "a tg test per value: that many tokens decoded one at a time; 0: none (default 128)");
  list("-d,--n-depth", a.n_depths, "run each test after this many context tokens (default 0)");
  cmd->add_option("-r,--repetitions", a.n_reps, "repetitions; t/s is their mean ± stddev, rates at the median (default 3)");
  cmd->add_option("-o,--output", a.output, "md (a markdown table, the default), csv, json (an array) or jsonl");
  cmd->add_flag("--json", a.json, "the same as -o json");
  cmd->add_option("--plot", a.plot, "write a roofline chart of the pp and the tg test to this SVG file");
  cmd->add_option("--batch", a.batches, "through the engine: decode this many sequences together, e.g. 1,4,16,32")
      ->delimiter(',')->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--cached-prefix", a.cached_prefix,
                  "through the engine: TTFT of a prompt whose first N tokens are in the prefix cache, against cold");
  a.engine.add_to(cmd, /*with_parallel=*/false);
  cmd->add_option("--prompt", a.prompt, "with --draft-model or --spec-ngram: the text to continue (default 'Once upon a time')");
  cmd->add_flag("--verify-cost", a.verify_cost,
                "time one pass over k + 1 tokens of a sequence at a -p token context against a 1-token step, k = 0..8");
  cmd->add_flag("--remeasure", a.remeasure,
                "measure the roofline again (on an idle machine) instead of using the cached one, and cache it; "
                "each decode test's DRAM read bandwidth is also measured right before and after it, and its share "
                "of the roofline is of the larger");
  cmd->add_flag("--profile", a.profile,
                "after the table, each pp/tg test's time per forward step (embed, norm, qkv, attention, attn_output, "
                "ffn_gate_up, ffn_down, moe_ffn, logits, other) with the bytes each must read and the rate it reached "
                "(-o json: a 'profile' array per row)");
  register_bench_serve(*cmd);
  cmd->callback([cmd] {
    if (cmd->got_subcommand("serve")) return;
    run_bench(a);
  });
}

}  // namespace lumen::cli
