#include "engine/prefill_pacer.h"

#include <algorithm>
#include <cmath>

namespace lumen {

namespace {
constexpr double kDecay = 0.97;  // a step's weight after each newer one: ~30 steps of memory
}  // namespace

PrefillPacer::PrefillPacer(double factor, int64_t min_tokens, int64_t max_tokens)
    : factor_(factor), min_tokens_(std::max<int64_t>(1, min_tokens)), max_tokens_(std::max(min_tokens_, max_tokens)) {}

void PrefillPacer::observe(int64_t n_tokens, double step_ms) {
  // The fit is kept even when pacing is off: speculative decoding weighs drafts with it.
  if (n_tokens < 1 || !(step_ms >= 0) || !std::isfinite(step_ms)) return;
  const double x = static_cast<double>(n_tokens), y = step_ms;
  s0_ = kDecay * s0_ + 1;
  sx_ = kDecay * sx_ + x;
  sy_ = kDecay * sy_ + y;
  sxx_ = kDecay * sxx_ + x * x;
  sxy_ = kDecay * sxy_ + x * y;
}

bool PrefillPacer::fit(double* fixed_ms, double* ms_per_token) const {
  const double det = s0_ * sxx_ - sx_ * sx_;
  // Too little spread in step sizes to tell the fixed cost from the per-token one.
  if (s0_ < 2 || det <= 1e-9 * s0_ * sxx_) return false;
  double c = (s0_ * sxy_ - sx_ * sy_) / det;
  double a = (sy_ - c * sx_) / s0_;
  if (!(c > 0)) return false;
  if (a < 0) {  // noise: the steps are per-token cost only
    a = 0;
    c = sxy_ / sxx_;
  }
  *fixed_ms = a;
  *ms_per_token = c;
  return true;
}

int64_t PrefillPacer::cap(int64_t n_decode) const {
  if (factor_ <= 0 || n_decode < 1) return 0;
  double a = 0, c = 0;
  if (!fit(&a, &c)) return 0;
  // a + c (n_decode + p) <= factor (a + c n_decode)
  const double p = (factor_ - 1.0) * (a + c * static_cast<double>(n_decode)) / c;
  if (!std::isfinite(p)) return max_tokens_;
  return std::clamp(static_cast<int64_t>(p), min_tokens_, max_tokens_);
}

}  // namespace lumen
