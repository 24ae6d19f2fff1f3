#include "engine/sampling_params.h"

#include <cmath>

#include "core/error.h"

namespace lumen {

void SamplingParams::validate(int n_vocab) const {
  if (n_vocab <= 0) fail("sampling: vocabulary size must be positive, got {}", n_vocab);
  if (!std::isfinite(temperature) || temperature < 0.0f)
    fail("sampling: temperature must be a finite number >= 0, got {}", temperature);
  if (top_k < 0) fail("sampling: top_k must be >= 0 (0 = off), got {}", top_k);
  // Written as !(in range) so that NaN is rejected too.
  if (!(top_p >= 0.0f && top_p <= 1.0f))
    fail("sampling: top_p must be in [0, 1] (1 = off), got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    fail("sampling: min_p must be in [0, 1] (0 = off), got {}", min_p);
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
    fail("sampling: repetition_penalty must be a finite number > 0 (1 = off), got {}",
         repetition_penalty);
  if (!std::isfinite(frequency_penalty))
    fail("sampling: frequency_penalty must be finite, got {}", frequency_penalty);
  if (!std::isfinite(presence_penalty))
    fail("sampling: presence_penalty must be finite, got {}", presence_penalty);
  if (penalty_last_n < -1)
    fail("sampling: penalty_last_n must be >= -1 (-1 = whole context, 0 = off), got {}",
         penalty_last_n);
  for (const LogitBias& b : logit_bias) {
    if (b.token < 0 || b.token >= n_vocab)
      fail("sampling: logit_bias token id {} is outside the vocabulary [0, {})", b.token, n_vocab);
    // -inf bans a token; +inf or NaN would turn the softmax into NaN.
    if (std::isnan(b.bias) || b.bias == INFINITY)
      fail("sampling: logit_bias for token {} must be a number or -infinity, got {}", b.token,
           b.bias);
  }
  for (size_t i = 0; i < stop.size(); i++)
    if (stop[i].empty()) fail("sampling: stop string #{} is empty", i);
  if (max_tokens < -1) fail("sampling: max_tokens must be >= -1 (-1 = no limit), got {}", max_tokens);
}

}  // namespace lumen
