// `lumen bench --profile`: where a test's time went, step by step
// (core/step_profile.h). One row per decoder step the model ran, in layer
// order, then what the steps leave of the test's timed time ("other": picking
// the token, the cache's bookkeeping, the calls between steps) and the total.
// Each row's time is per unit (a decoded token for tg, a prompt for pp), with
// its share of the timed total, the bytes the step must read per unit (weights
// or K/V) and the rates those and its operations give.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/step_profile.h"

namespace lumen {

struct StepRow {
  std::string step;   // core/step_profile.h's step_name, "other" or "total"
  int64_t calls = 0;  // over the whole test (0 for "other")
  double ms = 0;      // per unit
  double share = 0;   // of the timed total, 0..1
  double bytes = 0;   // per unit
  double gb_s = 0;    // bytes / time (0 without bytes)
  double gflop_s = 0; // operations / time (0 without operations)
};

// `units`: how many units the totals cover (tg: repetitions x decoded tokens;
// pp: repetitions); `timed_s`: the test's timed seconds over all repetitions.
std::vector<StepRow> step_rows(const StepProfile &profile, double units,
                               double timed_s);
nlohmann::json step_rows_json(const std::vector<StepRow> &rows);
// A markdown table under a title line ("profile   tg128 -t 2: ms per token,
// ...").
std::string step_rows_md(const std::string &title,
                         const std::vector<StepRow> &rows);

} // namespace lumen
