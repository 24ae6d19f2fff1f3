// `lumen quantize IN.gguf OUT.gguf TYPE`: convert a model's weights to another type (or the
// Q4_K_M / Q5_K_M mixes), streaming tensor by tensor; the rules are in quantize/model_quantizer.h.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "quantize/model_quantizer.h"

namespace lumen::cli {

namespace {

struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string type;
  int n_threads = 0;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string size_str(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

void run_quantize(const QuantizeArgs& a) {
  const auto target = parse_quant_target(a.type);
  if (!target) fail("unknown quantization type '{}'; valid types: {}", a.type, join(quant_target_names()));
  if (a.n_threads < 0) usage_fail("-t/--threads must not be negative");
  if (!std::filesystem::exists(a.input)) fail("{}: no such file", a.input);
  // Writing the output replaces the file: the input must survive (also through a link).
  std::error_code ec;
  if (std::filesystem::exists(a.output) && std::filesystem::equivalent(a.input, a.output, ec))
    fail("{} and {} are the same file: the output would replace the input", a.input, a.output);
  if (std::filesystem::is_directory(a.output)) fail("{}: is a directory (give the output file's name)", a.output);
  auto in = GgufFile::open(a.input);
  const std::vector<TensorPlan> plan = plan_quantization(*in, *target);

  bool requantize = false;
  for (const TensorPlan& p : plan) {
    if (!p.note.empty()) fmt::print(stderr, "note: {}: {}\n", p.name, p.note);
    const GgmlType s = p.src_type;
    if (!p.copy && s != GgmlType::F32 && s != GgmlType::F16 && s != GgmlType::BF16 && p.dst_type != GgmlType::F32)
      requantize = true;
  }
  if (requantize)
    fmt::print(stderr, "note: {} holds quantized weights; requantizing them loses more than quantizing an F32/F16 original\n",
               a.input);

  QuantizeOptions opt;
  opt.n_threads = a.n_threads;
  const int width = static_cast<int>(fmt::format("{}", plan.size()).size());
  opt.on_progress = [&](const QuantizeProgress& p) {
    if (!p.done) return;
    fmt::print(stderr, "[{:>{}}/{}] {:<32} {:>6} -> {:<6} {:<14} {:>9} -> {:>9}{}\n", p.index + 1, width,
               p.n_tensors, p.plan->name, type_name(p.plan->src_type), type_name(p.plan->dst_type),
               p.tensor->shape_string(), size_str(p.in_bytes), size_str(p.out_bytes), p.plan->copy ? "  (copied)" : "");
  };
  const QuantizeStats s = quantize_model(*in, plan, *target, a.output, opt);
  fmt::print(stderr, "{}: {} tensors ({} converted, {} with a fallback type), {} -> {}, {} in {:.2f} s\n",
             a.output, s.n_tensors, s.n_quantized, s.n_fallback, size_str(s.in_bytes), size_str(s.out_bytes), target->name,
             s.seconds);
}

}  // namespace

void register_quantize(CLI::App& app) {
  static QuantizeArgs a;
  auto* cmd = app.add_subcommand(
      "quantize", "convert a GGUF model's weights to another type: lumen quantize IN.gguf OUT.gguf TYPE");
  cmd->add_option("input", a.input, "input GGUF model")->required();
  cmd->add_option("output", a.output, "output GGUF file (written atomically)")->required();
  cmd->add_option("type", a.type, "target type: " + join(quant_target_names()))->required();
  cmd->add_option("-t,--threads", a.n_threads, "threads (default: all cores)");
  cmd->callback([] { run_quantize(a); });
}

}  // namespace lumen::cli
