// Perplexity by llama.cpp's method (llama-perplexity): non-overlapping chunks of n_ctx tokens,
// the first token of each chunk replaced by BOS, each chunk one causal sequence from position 0,
// and only the second half of each chunk scored.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/dtype.h"

namespace lumen {

class Model;

struct PerplexityResult {
  double ppl = 0.0;
  double ppl_stderr = 0.0;
  int64_t n_chunks = 0;
  int64_t n_scored = 0;
  std::vector<double> running_ppl;  // after each chunk
};

// tokens: the whole tokenized text (BOS first). Throws Error if it holds fewer than 2*n_ctx tokens.
// k_type / v_type: the KV cache's element types (F32 by default: the reference's attention
// precision).
// progress(chunk_index, running_ppl) is called after each chunk.
PerplexityResult compute_perplexity(Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx,
                                    int64_t max_chunks, int32_t bos_id, GgmlType k_type = GgmlType::F32,
                                    GgmlType v_type = GgmlType::F32,
                                    const std::function<void(int64_t, double)>& progress = {});

}  // namespace lumen
