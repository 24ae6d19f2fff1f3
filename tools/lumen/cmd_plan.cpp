// `lumen plan`: the memory arithmetic for a model: weights, KV bytes per token and per
// sequence, how many sequences fit, what a decode step reads, and what other KV types, context
// lengths or a window would change. Reads the file's shapes only.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "core/error.h"
#include "diagnostics/memory_plan.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/roofline.h"

namespace lumen::cli {

namespace {

struct PlanArgs {
  std::string model;
  int64_t n_ctx = 0;
  int64_t parallel = 16;
  std::string k_type = "f16", v_type = "f16";
  int32_t block_size = 16;
  std::string memory;
  int64_t window = 0;
  int n_threads = 0;
  bool json = false;
};

std::string human(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, u++;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

nlohmann::json row_json(const PlanRow& r) {
  return {{"label", r.label},
          {"kv_type_k", std::string(type_name(r.k_type))},
          {"kv_type_v", std::string(type_name(r.v_type))},
          {"n_ctx", r.n_ctx},
          {"window", r.window},
          {"windowed_layers", r.windowed_layers},
          {"kv_blocks_per_sequence", r.kv_blocks_per_sequence},
          {"kv_bytes_per_token", r.kv_bytes_per_token},
          {"kv_bytes_per_sequence", r.kv_bytes_per_sequence},
          {"sequences_fit", r.sequences_fit},
          {"decode_bytes_per_step_batch1", r.decode_bytes_batch1},
          {"decode_bytes_per_step_parallel", r.decode_bytes_parallel},
          {"decode_tok_s_batch1", r.tok_s_batch1},
          {"decode_tok_s_parallel", r.tok_s_parallel}};
}

void run(const PlanArgs& a) {
  PlanRequest q;
  q.n_ctx = a.n_ctx;
  q.parallel = a.parallel;
  q.k_type = parse_kv_type(a.k_type, "--kv-type-k");
  q.v_type = parse_kv_type(a.v_type, "--kv-type-v");
  q.block_size = a.block_size;
  q.memory_bytes = a.memory.empty() ? 0 : parse_memory_size(a.memory);
  q.window = a.window;
  // The bandwidth `lumen bench` measured and cached for this CPU, thread count and ISA.
  const int threads = a.n_threads > 0 ? a.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::optional<RooflineMeasurement> roof;
  try {
    roof = read_roofline_cache(roofline_cache_path(), cpu_features().brand, threads, active_isa());
  } catch (const Error&) {
  }
  if (roof) q.bandwidth_gb_s = roof->dram_read_gbps;
  const auto file = GgufFile::open(a.model);
  const MemoryPlan p = make_memory_plan(*file, q);

  if (a.json) {
    nlohmann::json alts = nlohmann::json::array();
    for (const auto& r : p.alternatives) alts.push_back(row_json(r));
    const nlohmann::json j{{"model", a.model},
                           {"arch", p.arch},
                           {"n_layer", p.n_layer},
                           {"n_head_kv", p.n_head_kv},
                           {"head_dim_k", p.head_dim_k},
                           {"head_dim_v", p.head_dim_v},
                           {"n_ctx", p.n_ctx},
                           {"parallel", p.parallel},
                           {"block_size", p.block_size},
                           {"weights_bytes", p.weights_bytes},
                           {"weights_read_per_step", p.weights_read_per_step},
                           {"memory_bytes", p.memory_bytes},
                           {"memory_is_available_ram", p.memory_is_available_ram},
                           {"bandwidth_gb_s", p.bandwidth_gb_s},
                           {"parallel_fits", p.parallel_fits},
                           {"plan", row_json(p.chosen)},
                           {"alternatives", alts}};
    fmt::print("{}\n", j.dump(2));
    return;
  }
  const PlanRow& c = p.chosen;
  fmt::print("model:        {} ({}, {} layers, {} KV heads of {}/{})\n", a.model, p.arch, p.n_layer, p.n_head_kv, p.head_dim_k, p.head_dim_v);
  fmt::print("weights:      {} (a decode step reads {})\n", human(p.weights_bytes), human(p.weights_read_per_step));
  if (c.windowed_layers > 0)
    fmt::print("windows:      {} of {} layers attend to the last {} positions (their KV counted at the window)\n",
               c.windowed_layers, p.n_layer, c.window);
  fmt::print("KV cache:     {}: {} per token, {} per sequence of {} tokens (blocks of {})\n", c.label.substr(0, c.label.find(',')),
             human(c.kv_bytes_per_token), human(c.kv_bytes_per_sequence), p.n_ctx, p.block_size);
  fmt::print("memory:       {} {}: beside the weights, {} sequences of {} tokens fit; --parallel {} {}\n", human(static_cast<double>(p.memory_bytes)),
             p.memory_is_available_ram ? "(available now)" : "(--memory)", c.sequences_fit, p.n_ctx, p.parallel,
             p.parallel_fits ? "fits" : fmt::format("does NOT fit (needs {})", human(p.weights_bytes + static_cast<double>(p.parallel) * c.kv_bytes_per_sequence)));
  fmt::print("decode step:  batch 1 at depth {} reads {}; batch {} reads {}\n", p.n_ctx, human(c.decode_bytes_batch1), p.parallel,
             human(c.decode_bytes_parallel));
  if (p.bandwidth_gb_s > 0)
    fmt::print("speed bound:  at {:.1f} GB/s (measured by lumen bench): {:.1f} tok/s at batch 1, {:.1f} tok/s over {} sequences\n",
               p.bandwidth_gb_s, c.tok_s_batch1, c.tok_s_parallel, p.parallel);
  else
    fmt::print("speed bound:  unknown bandwidth (run `lumen bench -m FILE` once to measure and cache it)\n");
  fmt::print("\n{:<44} {:>12} {:>12} {:>10} {:>12}\n", "what if", "KV/token", "KV/sequence", "sequences", "tok/s @B1");
  for (const PlanRow& r : p.alternatives)
    fmt::print("{:<44} {:>12} {:>12} {:>10} {:>12}\n", r.label, human(r.kv_bytes_per_token), human(r.kv_bytes_per_sequence), r.sequences_fit,
               r.tok_s_batch1 > 0 ? fmt::format("{:.1f}", r.tok_s_batch1) : std::string("-"));
}

}  // namespace

void register_plan(CLI::App& app) {
  static PlanArgs a;
  auto* cmd = app.add_subcommand("plan", "what a model's weights and KV cache cost, and how many sequences fit");
  cmd->add_option("-m,--model", a.model, "GGUF model file")->required();
  cmd->add_option("-c,--ctx-size", a.n_ctx, "context per sequence (default: the model's, at most 4096)");
  cmd->add_option("--parallel", a.parallel, "sequences at once (default 16)");
  cmd->add_option("--kv-type-k", a.k_type, "K element type: f32, f16 (default), bf16, q8_0, q4_0");
  cmd->add_option("--kv-type-v", a.v_type, "V element type: f32, f16 (default), bf16, q8_0, q4_0");
  cmd->add_option("--kv-block-size", a.block_size, "tokens per KV block (default 16)");
  cmd->add_option("--memory", a.memory, "the memory budget, e.g. 16GiB (default: the memory available now)");
  cmd->add_option("--window", a.window, "evaluate a sliding window of this many positions on every layer");
  cmd->add_option("-t,--threads", a.n_threads, "threads the bandwidth was measured with (default: all cores)");
  cmd->add_flag("--json", a.json, "one JSON object");
  cmd->callback([] { run(a); });
}

}  // namespace lumen::cli
