// Options of the commands that run the serving engine (run, bench --batch, later serve):
// --parallel, --kv-memory, --kv-block-size, --max-batch-tokens, --no-prefix-cache, --kv-type.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_core.h"

namespace lumen::cli {

struct EngineArgs {
  int64_t parallel = 16;
  std::string kv_memory;  // "" = what -c x --parallel needs, capped by free RAM
  int32_t kv_block_size = 16;
  int64_t max_batch_tokens = 512;
  int64_t max_prefill_while_decoding = 0;  // set before add_to() for another default
  double decode_stall_factor = 0;          // likewise (serve: 1.75)
  bool no_prefix_cache = false;
  std::string kv_type = "f16";

  void add_to(CLI::App* cmd, bool with_parallel = true);
  EngineConfig to_config(int64_t n_ctx) const;
};

// "2GiB", "512MiB", "1.5G", "800M", "4096" (bytes): binary units; Error for anything else.
int64_t parse_memory_size(const std::string& text);
GgmlType parse_kv_type(const std::string& text);

}  // namespace lumen::cli
