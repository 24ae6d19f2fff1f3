#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/roofline.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

// Tiny sizes: these tests check plumbing and sanity, never speed.
RooflineOptions tiny() {
  RooflineOptions o;
  o.dram_bytes = size_t{1} << 20;
  o.dram_reps = 2;
  o.compute_iterations = 2000;
  o.compute_reps = 1;
  return o;
}

bool positive(double x) { return std::isfinite(x) && x > 0; }

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("lumen_roofline_test_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

RooflineMeasurement sample(int n_threads, Isa isa, double gbps) {
  RooflineMeasurement m;
  m.cpu_brand = "Test CPU 9000";
  m.isa = isa;
  m.n_threads = n_threads;
  m.dram_read_gbps = gbps;
  m.fp32_gflops = 123.5;
  m.int8_gops = isa == Isa::Avx512 ? 987.25 : 0;
  m.dram_bytes = size_t{1} << 30;
  m.seconds = 1.5;
  m.measured_at = 1700000000;
  return m;
}

TEST(Roofline, EverySupportedIsaGivesPositiveFiniteRates) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!isa_supported(isa, cpu_features())) continue;
    for (int n_threads : {1, 2}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " x" + std::to_string(n_threads));
      const RooflineMeasurement m = measure_roofline(n_threads, isa, tiny());
      EXPECT_EQ(m.isa, isa);
      EXPECT_EQ(m.n_threads, n_threads);
      EXPECT_EQ(m.cpu_brand, cpu_features().brand);
      EXPECT_TRUE(positive(m.dram_read_gbps)) << m.dram_read_gbps;
      EXPECT_TRUE(positive(m.fp32_gflops)) << m.fp32_gflops;
      EXPECT_EQ(positive(m.int8_gops), isa == Isa::Avx512) << m.int8_gops;
      EXPECT_TRUE(m.int8_gops >= 0);
      EXPECT_EQ(m.dram_bytes, size_t{1} << 20);
      EXPECT_TRUE(positive(m.seconds));
      EXPECT_FALSE(m.from_cache);
      EXPECT_TRUE(positive(measure_dram_read(n_threads, isa, tiny())));  // the stream alone
    }
  }
}

TEST(Roofline, OddSizesAndThreadCountsAreRoundedToWholePages) {
  RooflineOptions o = tiny();
  o.dram_bytes = 100000;  // not a multiple of anything
  const RooflineMeasurement m = measure_roofline(3, Isa::Scalar, o);
  EXPECT_EQ(m.dram_bytes % (3 * 4096), 0u);
  EXPECT_TRUE(positive(m.dram_read_gbps));
}

TEST(Roofline, CalibratedComputeLoopRuns) {
  RooflineOptions o = tiny();
  o.compute_iterations = 0;  // calibrate to a very short rep
  o.compute_rep_seconds = 0.002;
  const RooflineMeasurement m = measure_roofline(1, best_isa(), o);
  EXPECT_TRUE(positive(m.fp32_gflops));
}

TEST(Roofline, RejectsBadArguments) {
  EXPECT_THROW(measure_roofline(0, Isa::Scalar, tiny()), Error);
  EXPECT_THROW(measure_roofline(-1, Isa::Scalar, tiny()), Error);
  RooflineOptions no_reps = tiny();
  no_reps.dram_reps = 0;
  EXPECT_THROW(measure_roofline(1, Isa::Scalar, no_reps), Error);
  EXPECT_THROW(measure_dram_read(0, Isa::Scalar, tiny()), Error);
  EXPECT_THROW(measure_dram_read(1, Isa::Scalar, no_reps), Error);
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (!isa_supported(isa, cpu_features())) {
      EXPECT_THROW(measure_roofline(1, isa, tiny()), Error);
      EXPECT_THROW(measure_dram_read(1, isa, tiny()), Error);
    }
}

TEST(RooflineCache, RoundTripKeepsOtherEntries) {
  TempDir dir;
  const std::string path = dir.file("sub/dir/roofline.json");  // directories are created
  EXPECT_FALSE(read_roofline_cache(path, "Test CPU 9000", 2, Isa::Avx2));

  write_roofline_cache(path, sample(2, Isa::Avx2, 64.5));
  write_roofline_cache(path, sample(1, Isa::Avx2, 35.25));
  write_roofline_cache(path, sample(2, Isa::Avx512, 66.0));
  write_roofline_cache(path, sample(2, Isa::Avx2, 65.0));  // replaces the first

  const auto a = read_roofline_cache(path, "Test CPU 9000", 2, Isa::Avx2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->dram_read_gbps, 65.0);
  EXPECT_EQ(a->fp32_gflops, 123.5);
  EXPECT_EQ(a->int8_gops, 0);
  EXPECT_EQ(a->dram_bytes, size_t{1} << 30);
  EXPECT_EQ(a->seconds, 1.5);
  EXPECT_EQ(a->measured_at, 1700000000);
  EXPECT_EQ(a->cpu_brand, "Test CPU 9000");
  const auto b = read_roofline_cache(path, "Test CPU 9000", 1, Isa::Avx2);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dram_read_gbps, 35.25);
  const auto c = read_roofline_cache(path, "Test CPU 9000", 2, Isa::Avx512);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->int8_gops, 987.25);
  EXPECT_FALSE(read_roofline_cache(path, "Test CPU 9000", 4, Isa::Avx2));
  EXPECT_FALSE(read_roofline_cache(path, "Other CPU", 2, Isa::Avx2));
  EXPECT_FALSE(read_roofline_cache(path, "Test CPU 9000", 2, Isa::Scalar));
  EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(getpid())));
}

TEST(RooflineCache, CorruptFileIsAMissAndGetsRebuilt) {
  TempDir dir;
  const std::string path = dir.file("roofline.json");
  for (const char* junk : {"", "{not json", "[]", R"({"format": 99, "entries": {}})",
                           R"({"format": 1, "entries": {"Test CPU 9000|2|avx2": {"cpu_brand": 5}}})",
                           R"({"format": 1, "entries": {"Test CPU 9000|2|avx2": {"cpu_brand": "Test CPU 9000",
                              "isa": "avx2", "n_threads": 2, "dram_read_gbps": -1, "fp32_gflops": 1,
                              "int8_gops": 0, "dram_bytes": 1, "seconds": 1, "measured_at": 1}}})"}) {
    std::ofstream(path) << junk;
    EXPECT_FALSE(read_roofline_cache(path, "Test CPU 9000", 2, Isa::Avx2)) << junk;
  }
  write_roofline_cache(path, sample(2, Isa::Avx2, 64.5));
  EXPECT_TRUE(read_roofline_cache(path, "Test CPU 9000", 2, Isa::Avx2));
}

TEST(RooflineCache, LoadOrMeasureMeasuresOnceThenReads) {
  TempDir dir;
  const std::string path = dir.file("lumen/roofline.json");
  const RooflineMeasurement first = load_or_measure_roofline(1, Isa::Scalar, path, tiny());
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.cache_error, "");
  EXPECT_TRUE(fs::exists(path));
  const RooflineMeasurement second = load_or_measure_roofline(1, Isa::Scalar, path, tiny());
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.dram_read_gbps, first.dram_read_gbps);
  EXPECT_EQ(second.fp32_gflops, first.fp32_gflops);
  EXPECT_EQ(second.measured_at, first.measured_at);
  EXPECT_EQ(second.cpu_brand, cpu_features().brand);
}

TEST(RooflineCache, UnwritableCacheIsReportedNotFatal) {
  TempDir dir;
  const std::string blocker = dir.file("not_a_dir");
  std::ofstream(blocker) << "x";
  const std::string path = blocker + "/roofline.json";
  EXPECT_THROW(write_roofline_cache(path, sample(1, Isa::Scalar, 1.0)), Error);
  const RooflineMeasurement m = load_or_measure_roofline(1, Isa::Scalar, path, tiny());
  EXPECT_FALSE(m.from_cache);
  EXPECT_NE(m.cache_error.find(path), std::string::npos) << m.cache_error;
  EXPECT_TRUE(positive(m.dram_read_gbps));
}

// Restores an environment variable on scope exit.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    had_ = v != nullptr;
    if (had_) old_ = v;
  }
  ~EnvGuard() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

TEST(RooflineCache, PathFollowsXdgThenHome) {
  EnvGuard xdg("XDG_CACHE_HOME"), home("HOME");
  setenv("XDG_CACHE_HOME", "/tmp/xdg-cache", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(roofline_cache_path(), "/tmp/xdg-cache/lumen/roofline.json");
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  EXPECT_EQ(roofline_cache_path(), "/home/someone/.cache/lumen/roofline.json");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(roofline_cache_path(), "/home/someone/.cache/lumen/roofline.json");
  unsetenv("HOME");
  EXPECT_THROW(roofline_cache_path(), Error);
}

TEST(RooflineCache, KeyNamesCpuThreadsAndIsa) {
  EXPECT_EQ(roofline_cache_key("AMD EPYC", 2, Isa::Avx512), "AMD EPYC|2|avx512");
}

}  // namespace
}  // namespace lumen
