// Order statistics of timing samples, shared by the engine's per-request timings and the
// benchmarks.
#pragma once

#include <vector>

namespace lumen {

// Median (mean of the middle two for an even count); 0 for an empty vector.
double median(std::vector<double> v);
// Nearest-rank percentile, p in [0, 100]; 0 for an empty vector.
double percentile(std::vector<double> v, double p);

}  // namespace lumen
