// Options of the commands that run the serving engine (run, bench, serve): --parallel,
// --kv-memory, --kv-block-size, --max-batch-tokens, --no-prefix-cache, and the KV cache's types
// (--kv-type-k, --kv-type-v, --kv-type for both; perplexity has these too).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_core.h"

namespace lumen::cli {

// --kv-type-k T, --kv-type-v T and the shorthand --kv-type T for both (f32, f16, bf16, q8_0,
// q4_0, any case); a specific flag wins over the shorthand. Unset: `fallback`.
struct KvTypeArgs {
  std::string both, k, v;
  std::string fallback = "f16";

  void add_to(CLI::App* cmd, const std::string& default_note);
  GgmlType k_type() const;
  GgmlType v_type() const;
};

struct EngineArgs {
  int64_t parallel = 16;
  std::string kv_memory;  // "" = what -c x --parallel needs, capped by free RAM
  int32_t kv_block_size = 16;
  int64_t max_batch_tokens = 512;
  int64_t max_prefill_while_decoding = 0;  // set before add_to() for another default
  double decode_stall_factor = 0;          // likewise (serve: 1.75)
  bool no_prefix_cache = false;
  KvTypeArgs kv_types;  // default f16, as llama.cpp
  int32_t spec_ngram = 0;   // --spec-ngram[=N]: n-gram prompt lookup matching N tokens (3 when bare)
  int32_t spec_tokens = 4;  // --spec-tokens K: most drafts per step (0 = off)
  std::string draft_model;  // --draft-model FILE: speculative decoding with a draft model
  bool spec_always = false; // --spec-always: draft whether or not it pays (no cost model)

  void add_to(CLI::App* cmd, bool with_parallel = true);
  EngineConfig to_config(int64_t n_ctx) const;
};

// "2GiB", "512MiB", "1.5G", "800M", "4096" (bytes): binary units; Error for anything else.
int64_t parse_memory_size(const std::string& text);
// "q8_0", "F16", ...: one of the five KV cache types; Error naming `flag` and the choices.
GgmlType parse_kv_type(const std::string& text, const char* flag = "--kv-type");
// "F16" when K and V agree, else "Q8_0/Q4_0" (K/V).
std::string kv_types_name(GgmlType k, GgmlType v);

}  // namespace lumen::cli
