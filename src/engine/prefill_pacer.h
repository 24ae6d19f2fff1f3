// PrefillPacer: how many prompt tokens a step that carries decodes may compute, from measured
// step times, so that such a step takes about `factor` times a decode-only step. Every decoding
// request waits for the whole step, so its inter-token latency is the step's time: an unpaced
// 512-token prompt chunk can stretch one gap twenty-fold. The pacer fits step time = a + c x
// tokens to the engine's own recent steps (least squares, older steps fading) and sizes the
// chunks to fit (stall-free batching, as in Sarathi-Serve, without a hand-tuned chunk size per
// model and machine). Pure logic: the engine feeds it and hands the cap to the scheduler; it
// changes which step computes a token, never what is computed.
#pragma once

#include <cstdint>

namespace lumen {

class PrefillPacer {
 public:
  // factor <= 0: off (cap() is 0). Caps are clamped to [min_tokens, max_tokens].
  PrefillPacer(double factor, int64_t min_tokens, int64_t max_tokens);
  // One finished step: the tokens it computed and its time.
  void observe(int64_t n_tokens, double step_ms);
  // Prompt tokens for a step that also carries n_decode decodes; 0 = no cap (off, no decodes,
  // or not measured well enough yet).
  int64_t cap(int64_t n_decode) const;
  // The fit (for tests and diagnostics); false until two different step sizes were seen.
  bool fit(double* fixed_ms, double* ms_per_token) const;

 private:
  double factor_;
  int64_t min_tokens_, max_tokens_;
  // Weighted sums over steps of 1, x, y, x*x, x*y (x tokens, y ms), each older step weighing
  // kDecay times the next.
  double s0_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

}  // namespace lumen
