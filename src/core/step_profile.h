// Where a forward pass's time goes, step by step (`lumen bench --profile`).
// Each of the decoder's layer steps (model/decoder.h) adds its wall time on the
// thread that runs the forward pass (the pool's threads work inside it, so a
// step ends when its last thread does: its share of the step's time includes
// their imbalance and hand-offs) and the work it must do: the bytes it must
// read at least once (a matrix step its weights, attention its K/V) and its
// arithmetic (2 x multiply-adds). A null profile, the default, costs a step one
// branch.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace lumen {

// In the order a layer runs them; Moe stands in for the gate/up and down steps
// in a mixture.
enum class Step : int {
  Embed,      // token embedding rows (dequantized)
  Norm,       // RMSNorm of every token's row
  Qkv,        // the Q, K and V projections (one job)
  Attention,  // per-head biases, Q/K norms, RoPE, the K/V write, then attention
              // over the cache
  AttnOutput, // the output projection (with its post-norm and residual add,
              // where the model has them)
  FfnGateUp,  // gate and up projections and the GLU activation
  FfnDown,    // down projection (with its post-norm and residual add)
  Moe, // router, the chosen experts' gate/up/down, their weighted sum and the
       // residual add
  Logits, // final norm, output matrix, soft-cap
};
inline constexpr int kNumSteps = 9;

// "embed", "norm", "qkv", "attention", "attn_output", "ffn_gate_up",
// "ffn_down", "moe_ffn", "logits".
const char *step_name(Step s);

struct StepTotals {
  int64_t calls = 0;
  double seconds = 0;
  double bytes = 0; // read at least once: weights, or K/V
  double flops = 0;
};

class StepProfile {
public:
  void add(Step s, double seconds, double bytes, double flops);
  const StepTotals &at(Step s) const { return totals_[static_cast<int>(s)]; }
  double seconds() const; // of every step
  void clear() { totals_ = {}; }

private:
  std::array<StepTotals, kNumSteps> totals_{};
};

// Times one step from construction to destruction into `profile` (nothing when
// it is null). The work is given by set_work, which callers compute only when
// active().
class StepTimer {
public:
  StepTimer(StepProfile *profile, Step s) : profile_(profile), step_(s) {
    if (profile_)
      start_ = Clock::now();
  }
  ~StepTimer() {
    if (profile_)
      profile_->add(
          step_, std::chrono::duration<double>(Clock::now() - start_).count(),
          bytes_, flops_);
  }
  StepTimer(const StepTimer &) = delete;
  StepTimer &operator=(const StepTimer &) = delete;

  bool active() const { return profile_ != nullptr; }
  void set_work(double bytes, double flops) { bytes_ = bytes, flops_ = flops; }

private:
  using Clock = std::chrono::steady_clock;
  StepProfile *profile_;
  Step step_;
  Clock::time_point start_{};
  double bytes_ = 0, flops_ = 0;
};

} // namespace lumen
