// Roofline micro-benchmarks: the machine's DRAM read bandwidth and peak compute rates, the two
// ceilings a kernel is judged against (`lumen bench` prints them; the kernel planner can use
// them). Measured with plain std::threads, unpinned, once per (CPU, thread count, ISA) and
// cached as JSON in $XDG_CACHE_HOME/lumen/roofline.json (default ~/.cache/lumen/roofline.json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/isa.h"

namespace lumen {

struct RooflineMeasurement {
  std::string cpu_brand;
  Isa isa = Isa::Scalar;
  int n_threads = 1;
  double dram_read_gbps = 0;  // 1e9 bytes/s, best rep, all threads together
  double fp32_gflops = 0;     // 2 flops per FMA lane (Scalar ISA: SSE mul + add pairs)
  double int8_gops = 0;       // VNNI vpdpbusd, 2 ops per u8*s8 product; 0 = not measured
  size_t dram_bytes = 0;      // size of the streamed buffer
  // What the caches hold for the threads (the L3 and each thread's L2, from CPUID/sysfs, not
  // measured); a step that reads more than this reads most of it from DRAM. 0 = unknown.
  size_t cache_bytes = 0;
  double seconds = 0;         // wall time the measurement took (allocation included)
  int64_t measured_at = 0;    // unix time

  // Set by load_or_measure_roofline only; not stored in the cache.
  bool from_cache = false;
  std::string cache_error;  // why the cache could not be read or written; empty when fine
};

struct RooflineOptions {
  // Streamed buffer: 0 = 1 GiB (at most a quarter of physical memory).
  size_t dram_bytes = 0;
  int dram_reps = 8;  // ~15 ms each at 70 GB/s; the best one filters out neighbours' noise
  // Compute loops: 0 iterations = calibrate each rep to about compute_rep_seconds.
  int64_t compute_iterations = 0;
  double compute_rep_seconds = 0.04;
  int compute_reps = 5;  // after one warm-up rep (lets the clock ramp up)
};

// Measures with active_isa()'s kernels and default options (about 1-2 s).
RooflineMeasurement measure_roofline(int n_threads);
// `isa` must be one this CPU supports (throws lumen::Error otherwise); n_threads >= 1.
RooflineMeasurement measure_roofline(int n_threads, Isa isa, const RooflineOptions& options);
// Only the DRAM read bandwidth (1e9 bytes/s, best rep), as measure_roofline measures it, with
// the same argument checks: for a benchmark that wants the bandwidth of the same minute as its
// test (neighbours on a shared machine move it by half within minutes). About 0.3-0.5 s.
double measure_dram_read(int n_threads, Isa isa, const RooflineOptions& options = {});

// $XDG_CACHE_HOME/lumen/roofline.json if XDG_CACHE_HOME is an absolute path, else
// $HOME/.cache/lumen/roofline.json; throws lumen::Error when neither is set.
std::string roofline_cache_path();
std::string roofline_cache_key(const std::string& cpu_brand, int n_threads, Isa isa);

// The cached entry for (cpu_brand, n_threads, isa); nullopt when the file or the entry is
// missing, or the file is not a valid cache (a cache is rebuilt, never an error).
std::optional<RooflineMeasurement> read_roofline_cache(const std::string& path, const std::string& cpu_brand,
                                                       int n_threads, Isa isa);
// Adds or replaces m's entry (other entries kept), creating directories as needed; the file is
// replaced atomically. Throws lumen::Error naming the path when it cannot be written.
void write_roofline_cache(const std::string& path, const RooflineMeasurement& m);

// Cached result for (cpu_features().brand, n_threads, active_isa()), else measures and stores
// it. A cache that cannot be written does not fail the call: see cache_error.
RooflineMeasurement load_or_measure_roofline(int n_threads);
RooflineMeasurement load_or_measure_roofline(int n_threads, Isa isa, const std::string& cache_path,
                                             const RooflineOptions& options);

namespace detail {
// Per-thread kernels behind the measurement, one set per ISA (roofline.cpp holds the baseline
// SSE2 ones; kernels/avx2 and kernels/avx512 the others). Only call a kernel whose ISA
// isa_supported() says the CPU runs.

// Reads n_bytes (a multiple of 256) from 64-byte aligned data with vector loads; the result
// depends on every byte so the loads cannot be dropped.
uint64_t read_stream_sse2(const void* data, size_t n_bytes);
uint64_t read_stream_avx2(const void* data, size_t n_bytes);
uint64_t read_stream_avx512(const void* data, size_t n_bytes);

// n_iterations rounds of independent register-resident multiply-add chains (acc = acc*a + b);
// returns the flops done and stores a value depending on every accumulator in *sink.
double fma_peak_sse2(int64_t n_iterations, float a, float b, float* sink);
double fma_peak_avx2(int64_t n_iterations, float a, float b, float* sink);
double fma_peak_avx512(int64_t n_iterations, float a, float b, float* sink);

// Same with vpdpbusd (u8 x s8 -> s32, 4 products per lane); returns the int8 ops done.
double vnni_peak_avx512(int64_t n_iterations, int32_t* sink);
}  // namespace detail

}  // namespace lumen
