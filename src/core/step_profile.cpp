#include "core/step_profile.h"

namespace lumen {

const char *step_name(Step s) {
  switch (s) {
  case Step::Embed:
    return "embed";
  case Step::Norm:
    return "norm";
  case Step::Qkv:
    return "qkv";
  case Step::Attention:
    return "attention";
  case Step::AttnOutput:
    return "attn_output";
  case Step::FfnGateUp:
    return "ffn_gate_up";
  case Step::FfnDown:
    return "ffn_down";
  case Step::Moe:
    return "moe_ffn";
  case Step::Logits:
    return "logits";
  }
  return "?";
}

void StepProfile::add(Step s, double seconds, double bytes, double flops) {
  StepTotals &t = totals_[static_cast<int>(s)];
  t.calls++;
  t.seconds += seconds;
  t.bytes += bytes;
  t.flops += flops;
}

double StepProfile::seconds() const {
  double s = 0;
  for (const StepTotals &t : totals_)
    s += t.seconds;
  return s;
}

} // namespace lumen
