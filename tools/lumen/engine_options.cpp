#include "engine_options.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace lumen::cli {

void EngineArgs::add_to(CLI::App* cmd, bool with_parallel) {
  if (with_parallel) cmd->add_option("--parallel", parallel, "most sequences computed together (default 16)");
  cmd->add_option("--kv-memory", kv_memory,
                  "KV cache size, e.g. 2GiB or 512MiB (default: what -c x --parallel needs, capped by free memory)");
  cmd->add_option("--kv-block-size", kv_block_size, "tokens per KV block (default 16)");
  cmd->add_option("--max-batch-tokens", max_batch_tokens, "token budget of one engine step (default 512)");
  cmd->add_option("--max-prefill-while-decoding", max_prefill_while_decoding,
                  fmt::format("most prompt tokens one step computes while other sequences decode: bounds their "
                              "inter-token latency, delays newcomers' first token (0 = the whole budget; default {})",
                              max_prefill_while_decoding));
  cmd->add_option("--decode-stall-factor", decode_stall_factor,
                  fmt::format("size the prompt chunks of steps that carry decodes, from measured step times, so "
                              "that such a step takes about this many times a decode-only step (0 = off; default {})",
                              decode_stall_factor));
  cmd->add_flag("--no-prefix-cache", no_prefix_cache, "do not reuse the KV blocks of earlier prompts");
  kv_types.add_to(cmd, "default f16, as llama.cpp");
  cmd->add_flag("--spec-ngram{3}", spec_ngram,
                "speculative decoding by n-gram prompt lookup: draft the tokens that followed the latest earlier "
                "occurrence of the last N tokens (--spec-ngram alone: N = 3; --spec-ngram=N)");
  cmd->add_option("--spec-tokens", spec_tokens, "most draft tokens verified per step and request (default 4; 0 = off)");
  cmd->add_flag("--spec-always", spec_always,
                "draft even where the measured step times say drafts do not pay (greedy requests weigh them by default)");
  cmd->add_option("--draft-model", draft_model,
                  "speculative decoding with this draft model (the target's vocabulary; runs on the same threads)");
}

void KvTypeArgs::add_to(CLI::App* cmd, const std::string& default_note) {
  const std::string choices = "f32, f16, bf16, q8_0 or q4_0";
  cmd->add_option("--kv-type-k", k, fmt::format("KV cache element type of K: {} ({})", choices, default_note));
  cmd->add_option("--kv-type-v", v, fmt::format("KV cache element type of V: {} ({})", choices, default_note));
  cmd->add_option("--kv-type", both, "KV cache element type of both K and V (--kv-type-k/-v win over it)");
}

GgmlType KvTypeArgs::k_type() const {
  return !k.empty() ? parse_kv_type(k, "--kv-type-k") : parse_kv_type(both.empty() ? fallback : both);
}

GgmlType KvTypeArgs::v_type() const {
  return !v.empty() ? parse_kv_type(v, "--kv-type-v") : parse_kv_type(both.empty() ? fallback : both);
}

EngineConfig EngineArgs::to_config(int64_t n_ctx) const {
  EngineConfig c;
  c.n_ctx = n_ctx;
  c.max_running = parallel;
  c.max_batch_tokens = max_batch_tokens;
  c.max_prefill_tokens_while_decoding = max_prefill_while_decoding;
  c.decode_stall_factor = decode_stall_factor;
  c.block_size = kv_block_size;
  c.kv_memory = kv_memory.empty() ? 0 : parse_memory_size(kv_memory);
  c.prefix_caching = !no_prefix_cache;
  c.kv_type_k = kv_types.k_type();
  c.kv_type_v = kv_types.v_type();
  c.spec_ngram = spec_ngram;
  c.spec_tokens = spec_tokens;
  c.spec_cost_model = !spec_always;
  return c;
}

GgmlType parse_kv_type(const std::string& text, const char* flag) {
  std::string low = text;
  for (char& ch : low) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const auto& [name, t] : {std::pair{"f32", GgmlType::F32}, {"f16", GgmlType::F16}, {"bf16", GgmlType::BF16},
                                {"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0}})
    if (low == name) return t;
  fail("{} '{}': expected f32, f16, bf16, q8_0 or q4_0", flag, text);
}

std::string kv_types_name(GgmlType k, GgmlType v) {
  return k == v ? std::string(type_name(k)) : fmt::format("{}/{}", type_name(k), type_name(v));
}

int64_t parse_memory_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) i++;
  const std::string number = text.substr(0, i);
  std::string unit = text.substr(i);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(number, &used);
    if (used != number.size()) throw std::invalid_argument("size");
  } catch (const std::logic_error&) {
    fail("--kv-memory '{}': expected a size such as 2GiB, 512MiB or a number of bytes", text);
  }
  double scale = 1;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else fail("--kv-memory '{}': unknown unit '{}' (use KiB, MiB, GiB or TiB)", text, unit);
  const double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 9.0e18) fail("--kv-memory '{}' is not a usable size", text);
  return static_cast<int64_t>(std::llround(bytes));
}

}  // namespace lumen::cli
