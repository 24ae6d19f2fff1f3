#include "diagnostics/perplexity.h"

#include <cmath>

#include "core/error.h"
#include "kv/sequence_kv.h"
#include "model/model.h"

namespace lumen {

PerplexityResult compute_perplexity(Model& model, const std::vector<int32_t>& tokens, int64_t n_ctx,
                                    int64_t max_chunks, int32_t bos_id, GgmlType k_type, GgmlType v_type,
                                    const std::function<void(int64_t, double)>& progress) {
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_ctx < 4) fail("perplexity context {} is too small", n_ctx);
  if (n_tokens < 2 * n_ctx)
    fail("the text has {} tokens; perplexity with a context of {} needs at least {}", n_tokens, n_ctx, 2 * n_ctx);
  int64_t n_chunks = n_tokens / n_ctx;
  if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
  const int64_t n_vocab = model.config().n_vocab;
  const int64_t n_batch = model.n_batch();
  const int64_t first = n_ctx / 2;

  SequenceKv kv(model.kv_layout(k_type, v_type), 1, n_ctx);
  std::vector<float> logits(static_cast<size_t>(n_batch) * n_vocab);
  PerplexityResult r;
  r.n_chunks = n_chunks;
  double nll = 0.0, nll2 = 0.0;
  Batch batch;
  for (int64_t c = 0; c < n_chunks; c++) {
    kv.clear();
    const int64_t start = c * n_ctx;
    // Evaluate the chunk in pieces of n_batch tokens; logits only where they are scored.
    for (int64_t b = 0; b < n_ctx; b += n_batch) {
      const int64_t e = std::min(n_ctx, b + n_batch);
      batch.clear();
      for (int64_t j = b; j < e; j++) {
        const int32_t tok = j == 0 ? bos_id : tokens[start + j];
        kv.add(batch, tok, static_cast<int32_t>(j), 0, j >= first && j < n_ctx - 1);
      }
      model.forward(batch, kv.storage(), logits.data());
      int64_t row = 0;
      for (int64_t j = b; j < e; j++) {
        if (!(j >= first && j < n_ctx - 1)) continue;
        const float* l = &logits[static_cast<size_t>(row++) * n_vocab];
        float max = l[0];
        for (int64_t v = 1; v < n_vocab; v++) max = std::max(max, l[v]);
        double sum = 0.0;
        for (int64_t v = 0; v < n_vocab; v++) sum += std::exp(l[v] - max);
        const int32_t next = tokens[start + j + 1];
        const double v = -(static_cast<double>(l[next] - max) - std::log(sum));
        nll += v;
        nll2 += v * v;
        r.n_scored++;
      }
    }
    r.running_ppl.push_back(std::exp(nll / r.n_scored));
    if (progress) progress(c, r.running_ppl.back());
  }
  const double mean = nll / r.n_scored;
  const double mean2 = nll2 / r.n_scored;
  r.ppl = std::exp(mean);
  r.ppl_stderr = r.n_scored > 1 ? r.ppl * std::sqrt((mean2 - mean * mean) / (r.n_scored - 1)) : 0.0;
  return r;
}

}  // namespace lumen
