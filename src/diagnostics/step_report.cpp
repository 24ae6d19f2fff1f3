#include "diagnostics/step_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace lumen {

namespace {

StepRow make_row(std::string name, int64_t calls, double seconds, double bytes,
                 double flops, double units, double timed_s) {
  StepRow r;
  r.step = std::move(name);
  r.calls = calls;
  r.ms = units > 0 ? 1e3 * seconds / units : 0;
  r.share = timed_s > 0 ? seconds / timed_s : 0;
  r.bytes = units > 0 ? bytes / units : 0;
  r.gb_s = seconds > 0 ? 1e-9 * bytes / seconds : 0;
  r.gflop_s = seconds > 0 ? 1e-9 * flops / seconds : 0;
  return r;
}

} // namespace

std::vector<StepRow> step_rows(const StepProfile &profile, double units,
                               double timed_s) {
  std::vector<StepRow> rows;
  double bytes = 0, flops = 0;
  for (int i = 0; i < kNumSteps; i++) {
    const StepTotals &t = profile.at(static_cast<Step>(i));
    if (t.calls == 0)
      continue;
    rows.push_back(make_row(step_name(static_cast<Step>(i)), t.calls, t.seconds,
                            t.bytes, t.flops, units, timed_s));
    bytes += t.bytes;
    flops += t.flops;
  }
  // The clock reads around the steps and around the test differ by nanoseconds:
  // never below 0.
  const double other = std::max(0.0, timed_s - profile.seconds());
  rows.push_back(make_row("other", 0, other, 0, 0, units, timed_s));
  rows.push_back(make_row("total", 0, std::max(timed_s, profile.seconds()),
                          bytes, flops, units, timed_s));
  return rows;
}

nlohmann::json step_rows_json(const std::vector<StepRow> &rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const StepRow &r : rows)
    a.push_back({{"step", r.step},
                 {"calls", r.calls},
                 {"ms", r.ms},
                 {"share", r.share},
                 {"bytes", r.bytes},
                 {"gb_s", r.gb_s},
                 {"gflop_s", r.gflop_s}});
  return a;
}

std::string step_rows_md(const std::string &title,
                         const std::vector<StepRow> &rows) {
  std::string o =
      title + "\n\n| step | ms | share | MB read | GB/s | GFLOP/s |\n| ---- | "
              "-: | ----: | ------: | ---: | ------: |\n";
  const auto num = [](double x, const char *f) {
    return x > 0 ? fmt::format(fmt::runtime(f), x) : std::string();
  };
  for (const StepRow &r : rows)
    o += fmt::format("| {} | {:.3f} | {:.1f}% | {} | {} | {} |\n", r.step, r.ms,
                     100.0 * r.share, num(1e-6 * r.bytes, "{:.2f}"),
                     num(r.gb_s, "{:.1f}"), num(r.gflop_s, "{:.1f}"));
  return o;
}

} // namespace lumen
