// `lumen perplexity -m FILE -f TEXT [-c N] [--chunks K]`: llama-perplexity's method (see
// src/diagnostics/perplexity.h), with a progress line per chunk and the estimate on the last line.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "core/text_file.h"
#include "diagnostics/perplexity.h"
#include "model/model.h"
#include "engine_options.h"
#include "model_options.h"
#include "tokenizer/tokenizer.h"

namespace lumen::cli {

void register_perplexity(CLI::App& app) {
  static ModelArgs margs;
  static std::string text_file;
  static int64_t n_chunks = -1;
  static KvTypeArgs kv_types;
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text, by llama-perplexity's method");
  margs.n_ctx = 512;  // llama-perplexity's chunk size; ModelArgs' help says otherwise
  margs.add_to(cmd);
  cmd->get_option("--ctx-size")->description("tokens per chunk (default 512, as llama-perplexity)");
  cmd->add_option("-f,--file", text_file, "text file (one trailing newline is dropped, as llama-perplexity does)")->required();
  cmd->add_option("--chunks", n_chunks, "most chunks to evaluate (default: all)");
  kv_types.fallback = "f32";
  kv_types.add_to(cmd, "default f32: the reference's precision");
  cmd->callback([] {
    if (margs.n_ctx < 2) usage_fail("-c/--ctx-size must be at least 2 for perplexity, got {}", margs.n_ctx);
    std::string text = read_whole_file(text_file);
    if (!text.empty() && text.back() == '\n') text.pop_back();  // exactly one, as llama.cpp does

    ModelArgs args = margs;
    if (args.n_batch < args.n_ctx) args.n_batch = args.n_ctx;  // one chunk per forward pass
    auto m = load_model(args);
    const int64_t n_ctx = margs.n_ctx;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> tokens = m->tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
    const int64_t avail = static_cast<int64_t>(tokens.size()) / n_ctx;
    const int64_t total = n_chunks > 0 ? std::min(n_chunks, avail) : avail;
    fmt::print(stderr, "{}: {} tokens, {} chunks of {}\n", text_file, tokens.size(), total, n_ctx);
    const int32_t bos = m->tokenizer->bos_id() >= 0 ? m->tokenizer->bos_id() : tokens.at(0);
    const GgmlType k_type = kv_types.k_type(), v_type = kv_types.v_type();
    fmt::print(stderr, "KV cache K {} / V {}\n", type_name(k_type), type_name(v_type));
    PerplexityResult r = compute_perplexity(*m->model, tokens, n_ctx, n_chunks, bos, k_type, v_type, [&](int64_t i, double ppl) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print(stderr, "\r[{}/{}] ppl {:.4f}  ({:.1f} s, {:.2f} s/chunk)", i + 1, total, ppl, s, s / (i + 1));
      fflush(stderr);
    });
    fmt::print(stderr, "\n");
    for (size_t i = 0; i < r.running_ppl.size(); i++) fmt::print("[{}]{:.4f},", i + 1, r.running_ppl[i]);
    fmt::print("\n");
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_stderr);
  });
}

}  // namespace lumen::cli
