// Roofline driver: threads, timing, buffer handling and the JSON cache (baseline x86-64), plus
// the SSE2 kernels the Scalar ISA is measured with.
#include "kernels/roofline.h"

#include <emmintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"

namespace lumen {

namespace detail {

uint64_t read_stream_sse2(const void* data, size_t n_bytes) {
  const __m128i* p = static_cast<const __m128i*>(data);
  const __m128i* end = p + n_bytes / sizeof(__m128i);
  __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
  for (; p < end; p += 16) {
    for (int k = 0; k < 16; k += 4) {
      s0 = _mm_add_epi64(s0, _mm_load_si128(p + k + 0));
      s1 = _mm_add_epi64(s1, _mm_load_si128(p + k + 1));
      s2 = _mm_add_epi64(s2, _mm_load_si128(p + k + 2));
      s3 = _mm_add_epi64(s3, _mm_load_si128(p + k + 3));
    }
  }
  const __m128i s = _mm_add_epi64(_mm_add_epi64(s0, s1), _mm_add_epi64(s2, s3));
  return static_cast<uint64_t>(_mm_cvtsi128_si64(s)) +
         static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s)));
}

double fma_peak_sse2(int64_t n_iterations, float a, float b, float* sink) {
  // Baseline x86-64 has no FMA: a multiply and a dependent add per step, 12 chains to cover
  // the combined latency; still 2 flops per lane per step. Named variables, not an array, so
  // the chains stay in registers whatever the optimisation level.
  const __m128 va = _mm_set1_ps(a), vb = _mm_set1_ps(b);
#define LUMEN_CHAINS(OP) OP(0) OP(1) OP(2) OP(3) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11)
#define LUMEN_INIT(k) __m128 c##k = _mm_set1_ps(0.1f * k);
#define LUMEN_STEP(k) c##k = _mm_add_ps(_mm_mul_ps(c##k, va), vb);
#define LUMEN_SUM(k) s = _mm_add_ps(s, c##k);
  LUMEN_CHAINS(LUMEN_INIT)
  for (int64_t i = 0; i < n_iterations; i++) {
    LUMEN_CHAINS(LUMEN_STEP)
  }
  __m128 s = _mm_setzero_ps();
  LUMEN_CHAINS(LUMEN_SUM)
#undef LUMEN_CHAINS
#undef LUMEN_INIT
#undef LUMEN_STEP
#undef LUMEN_SUM
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  *sink = _mm_cvtss_f32(s);
  return static_cast<double>(n_iterations) * 12 * 4 * 2;
}

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Kernels {
  uint64_t (*read_stream)(const void*, size_t);
  double (*fma_peak)(int64_t, float, float, float*);
  double (*vnni_peak)(int64_t, int32_t*);  // null: not measured at this ISA
};

Kernels kernels_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return {detail::read_stream_avx512, detail::fma_peak_avx512, detail::vnni_peak_avx512};
    case Isa::Avx2: return {detail::read_stream_avx2, detail::fma_peak_avx2, nullptr};
    case Isa::Scalar: break;
  }
  return {detail::read_stream_sse2, detail::fma_peak_sse2, nullptr};
}

// Runs body(thread, rep) on n_threads threads (the caller is thread 0) for n_reps reps; every
// rep starts on all threads together. Returns each rep's wall time, earliest start to latest
// finish. body must not throw.
template <class Body>
std::vector<double> run_parallel(int n_threads, int n_reps, const Body& body) {
  const size_t n = static_cast<size_t>(n_threads) * n_reps;
  std::vector<Clock::time_point> starts(n), ends(n);
  std::barrier sync(n_threads);
  std::atomic<bool> aborted{false};
  auto worker = [&](int thread) {
    for (int rep = 0; rep < n_reps; rep++) {
      sync.arrive_and_wait();
      if (aborted.load()) return;
      const size_t slot = static_cast<size_t>(rep) * n_threads + thread;
      starts[slot] = Clock::now();
      body(thread, rep);
      ends[slot] = Clock::now();
    }
  };
  std::vector<std::thread> threads;
  try {
    threads.reserve(n_threads - 1);
    for (int t = 1; t < n_threads; t++) threads.emplace_back(worker, t);
  } catch (const std::exception& e) {
    // Release the started threads from the first barrier (arriving for the missing ones too).
    aborted = true;
    const ptrdiff_t missing = n_threads - 1 - static_cast<ptrdiff_t>(threads.size());
    sync.wait(sync.arrive(missing + 1));
    for (auto& t : threads) t.join();
    fail("roofline: cannot start {} threads: {}", n_threads, e.what());
  }
  worker(0);
  for (auto& t : threads) t.join();

  std::vector<double> walls(n_reps);
  for (int rep = 0; rep < n_reps; rep++) {
    const auto first = starts.begin() + static_cast<ptrdiff_t>(rep) * n_threads;
    const auto last = ends.begin() + static_cast<ptrdiff_t>(rep) * n_threads;
    const auto start = *std::min_element(first, first + n_threads);
    const auto end = *std::max_element(last, last + n_threads);
    walls[rep] = std::chrono::duration<double>(end - start).count();
  }
  return walls;
}

// Anonymous mapping, 2 MiB aligned and THP-advised so the stream is not TLB-bound.
class StreamBuffer {
 public:
  explicit StreamBuffer(size_t n_bytes) : n_bytes_(n_bytes) {
    void* p = mmap(nullptr, n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      fail("roofline: cannot allocate {} MiB for the DRAM bandwidth test: {}", n_bytes >> 20, std::strerror(errno));
#ifdef MADV_HUGEPAGE
    madvise(p, n_bytes, MADV_HUGEPAGE);  // advice only; failure just means 4 KiB pages
#endif
    data_ = static_cast<char*>(p);
  }
  ~StreamBuffer() { munmap(data_, n_bytes_); }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  size_t n_bytes_ = 0;
};

// 1 GiB: 10x or more the L3 one core can fill on current x86 (32-96 MiB per AMD CCX, up to
// ~500 MiB socket-wide on the biggest Intel parts still 2x). Not sized from l3_bytes: the CPUID
// fallback reports whole-package L3 on AMD (508 MiB on this VM for a 32 MiB CCX), and first
// touch of fresh pages can cost seconds per GiB in a VM. At most a quarter of physical memory.
size_t default_dram_bytes() {
  size_t bytes = size_t{1} << 30;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) bytes = std::min(bytes, static_cast<size_t>(pages) * page_size / 4);
  return bytes;
}

// Best-of-reps read bandwidth in GB/s. Each thread first-touches (writes) its own slice, so the
// pages are real (an untouched mapping reads the shared zero page, which is cached) and local
// to the thread's NUMA node.
double measure_dram(int n_threads, const Kernels& k, size_t total_bytes, int n_reps, size_t* used_bytes) {
  constexpr size_t kPage = 4096;
  const size_t slice = std::max(kPage, total_bytes / n_threads / kPage * kPage);
  const size_t bytes = slice * n_threads;
  StreamBuffer buffer(bytes);
  const auto fill = [](int t) { return static_cast<uint64_t>(1 + t % 200); };
  run_parallel(n_threads, 1, [&](int t, int) { std::memset(buffer.data() + slice * t, static_cast<int>(fill(t)), slice); });
  std::vector<uint64_t> sinks(n_threads);  // written once per rep: no false sharing in the loop
  const auto walls = run_parallel(n_threads, n_reps, [&](int t, int) {
    sinks[t] += k.read_stream(buffer.data() + slice * t, slice);
  });
  uint64_t expected = 0;  // every byte of slice t is fill(t): the sums (mod 2^64) must match
  for (int t = 0; t < n_threads; t++) expected += (slice / 8) * 0x0101010101010101ull * fill(t) * n_reps;
  uint64_t total = 0;
  for (uint64_t s : sinks) total += s;
  LUMEN_ASSERT(total == expected);
  *used_bytes = bytes;
  return static_cast<double>(bytes) * 1e-9 / *std::min_element(walls.begin(), walls.end());
}

// Iterations for about `seconds` on one thread, from doubling trial runs.
template <class Kernel>
int64_t calibrate(const Kernel& kernel, double seconds) {
  int64_t n = 1024;
  for (;;) {
    const auto start = Clock::now();
    kernel(n);
    const double t = seconds_since(start);
    if (t >= 0.004 || n > (int64_t{1} << 40)) return std::max<int64_t>(1, static_cast<int64_t>(n * seconds / t));
    n *= 4;
  }
}

// Best-of-reps rate (ops/s) of a per-thread kernel(n_iterations) -> ops; rep 0 warms up.
template <class Kernel>
double measure_compute(int n_threads, const RooflineOptions& o, const Kernel& kernel) {
  const int64_t n_iter = o.compute_iterations > 0 ? o.compute_iterations : calibrate(kernel, o.compute_rep_seconds);
  std::vector<double> ops(n_threads);
  const auto walls = run_parallel(n_threads, o.compute_reps + 1, [&](int t, int) { ops[t] = kernel(n_iter); });
  double total = 0;
  for (double x : ops) total += x;
  return total / *std::min_element(walls.begin() + 1, walls.end());
}

std::optional<RooflineMeasurement> entry_from_json(const nlohmann::json& e) {
  if (!e.is_object()) return std::nullopt;
  try {
    RooflineMeasurement m;
    m.cpu_brand = e.at("cpu_brand").get<std::string>();
    m.isa = parse_isa(e.at("isa").get<std::string>());
    m.n_threads = e.at("n_threads").get<int>();
    m.dram_read_gbps = e.at("dram_read_gbps").get<double>();
    m.fp32_gflops = e.at("fp32_gflops").get<double>();
    m.int8_gops = e.at("int8_gops").get<double>();
    m.dram_bytes = e.at("dram_bytes").get<size_t>();
    m.seconds = e.at("seconds").get<double>();
    m.measured_at = e.at("measured_at").get<int64_t>();
    const auto positive = [](double x) { return std::isfinite(x) && x > 0; };
    if (!positive(m.dram_read_gbps) || !positive(m.fp32_gflops) || !std::isfinite(m.int8_gops) || m.int8_gops < 0)
      return std::nullopt;
    return m;
  } catch (const std::exception&) {  // missing key, wrong type, unknown ISA: not a usable entry
    return std::nullopt;
  }
}

nlohmann::json entry_to_json(const RooflineMeasurement& m) {
  return {{"cpu_brand", m.cpu_brand},         {"isa", isa_name(m.isa)},
          {"n_threads", m.n_threads},         {"dram_read_gbps", m.dram_read_gbps},
          {"fp32_gflops", m.fp32_gflops},     {"int8_gops", m.int8_gops},
          {"dram_bytes", m.dram_bytes},       {"seconds", m.seconds},
          {"measured_at", m.measured_at}};
}

constexpr int kCacheFormat = 1;

// The parsed cache file, or null when missing, unreadable or not ours.
nlohmann::json read_cache_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", 0) != kCacheFormat ||
      !doc.contains("entries") || !doc["entries"].is_object())
    return nullptr;
  return doc;
}

// The arguments every measurement takes, checked once for both entry points; the DRAM stream's
// buffer size (the default when options leave it 0).
size_t checked_dram_bytes(int n_threads, Isa isa, const RooflineOptions& options) {
  if (n_threads < 1 || n_threads > 4096) fail("roofline: thread count must be 1..4096, got {}", n_threads);
  const std::string missing = missing_features(isa, cpu_features());
  if (!missing.empty()) fail("roofline: this CPU cannot run {} kernels (lacks {})", isa_name(isa), missing);
  if (options.dram_reps < 1 || options.compute_reps < 1) fail("roofline: reps must be >= 1");
  return options.dram_bytes > 0 ? options.dram_bytes : default_dram_bytes();
}

}  // namespace

namespace {

size_t caches_of(int n_threads) {
  const CpuFeatures& f = cpu_features();
  return f.l3_bytes + f.l2_bytes * static_cast<size_t>(n_threads);
}

}  // namespace

RooflineMeasurement measure_roofline(int n_threads, Isa isa, const RooflineOptions& options) {
  const size_t bytes = checked_dram_bytes(n_threads, isa, options);
  const auto start = Clock::now();
  const Kernels k = kernels_for(isa);
  RooflineMeasurement m;
  m.cpu_brand = cpu_features().brand;
  m.isa = isa;
  m.n_threads = n_threads;
  m.cache_bytes = caches_of(n_threads);
  m.measured_at = static_cast<int64_t>(std::time(nullptr));

  m.dram_read_gbps = measure_dram(n_threads, k, bytes, options.dram_reps, &m.dram_bytes);

  // acc = acc * a + b converges to b / (1 - a) = 1: no overflow, no denormals, however long.
  // The sinks only exist so the work has a visible result (the kernels live in other
  // translation units, so the calls cannot be dropped anyway).
  m.fp32_gflops = 1e-9 * measure_compute(n_threads, options, [&](int64_t n) {
    float sink = 0;
    return k.fma_peak(n, 0.999999f, 1e-6f, &sink);
  });
  if (k.vnni_peak) {
    m.int8_gops = 1e-9 * measure_compute(n_threads, options, [&](int64_t n) {
      int32_t sink = 0;
      return k.vnni_peak(n, &sink);
    });
  }
  m.seconds = seconds_since(start);
  return m;
}

RooflineMeasurement measure_roofline(int n_threads) { return measure_roofline(n_threads, active_isa(), {}); }

double measure_dram_read(int n_threads, Isa isa, const RooflineOptions& options) {
  const size_t bytes = checked_dram_bytes(n_threads, isa, options);
  size_t used = 0;
  return measure_dram(n_threads, kernels_for(isa), bytes, options.dram_reps, &used);
}

std::string roofline_cache_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // The XDG spec says relative values are to be ignored.
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/lumen/roofline.json";
  const char* home = std::getenv("HOME");
  if (home && home[0] != '\0') return std::string(home) + "/.cache/lumen/roofline.json";
  fail("roofline cache: neither XDG_CACHE_HOME (absolute) nor HOME is set");
}

std::string roofline_cache_key(const std::string& cpu_brand, int n_threads, Isa isa) {
  return fmt::format("{}|{}|{}", cpu_brand, n_threads, isa_name(isa));
}

std::optional<RooflineMeasurement> read_roofline_cache(const std::string& path, const std::string& cpu_brand,
                                                       int n_threads, Isa isa) {
  const nlohmann::json doc = read_cache_file(path);
  if (doc.is_null()) return std::nullopt;
  const auto& entries = doc["entries"];
  const auto it = entries.find(roofline_cache_key(cpu_brand, n_threads, isa));
  if (it == entries.end()) return std::nullopt;
  auto m = entry_from_json(*it);
  // The key is only an index: the entry itself must say the same.
  if (!m || m->cpu_brand != cpu_brand || m->n_threads != n_threads || m->isa != isa) return std::nullopt;
  return m;
}

void write_roofline_cache(const std::string& path, const RooflineMeasurement& m) {
  namespace fs = std::filesystem;
  nlohmann::json doc = read_cache_file(path);
  if (doc.is_null()) doc = {{"format", kCacheFormat}, {"entries", nlohmann::json::object()}};
  doc["entries"][roofline_cache_key(m.cpu_brand, m.n_threads, m.isa)] = entry_to_json(m);

  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) fail("roofline cache {}: cannot create directory: {}", path, ec.message());
  }
  // Write a sibling file and rename it over the cache, so readers never see half a file.
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << doc.dump(2) << '\n';
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      fail("roofline cache {}: cannot write {}", path, tmp);
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    fail("roofline cache {}: cannot replace: {}", path, ec.message());
  }
}

RooflineMeasurement load_or_measure_roofline(int n_threads, Isa isa, const std::string& cache_path,
                                             const RooflineOptions& options) {
  const std::string& brand = cpu_features().brand;
  if (auto cached = read_roofline_cache(cache_path, brand, n_threads, isa)) {
    cached->from_cache = true;
    cached->cache_bytes = caches_of(n_threads);
    return *cached;
  }
  RooflineMeasurement m = measure_roofline(n_threads, isa, options);
  try {
    write_roofline_cache(cache_path, m);
  } catch (const Error& e) {
    m.cache_error = e.what();
  }
  return m;
}

RooflineMeasurement load_or_measure_roofline(int n_threads) {
  const Isa isa = active_isa();
  std::string path;
  try {
    path = roofline_cache_path();
  } catch (const Error& e) {
    RooflineMeasurement m = measure_roofline(n_threads, isa, {});
    m.cache_error = e.what();
    return m;
  }
  return load_or_measure_roofline(n_threads, isa, path, {});
}

}  // namespace lumen
