#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/error.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"

namespace lumen {
namespace {

// The flags line of /proc/cpuinfo as a set; empty when unavailable.
std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

CpuFeatures avx2_machine() {  // e.g. Haswell / Zen 2
  CpuFeatures f;
  f.brand = "Test CPU";
  f.sse42 = f.avx = f.avx2 = f.fma = f.f16c = f.bmi2 = true;
  f.os_saves_ymm = true;
  return f;
}

CpuFeatures avx512_machine() {  // e.g. Sapphire Rapids / Zen 4
  CpuFeatures f = avx2_machine();
  f.os_saves_zmm = true;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = f.avx512bf16 = true;
  return f;
}

TEST(CpuFeatures, ImplicationsHold) {
  const CpuFeatures f = detect_cpu_features();
  // a -> b, spelled !a || b so a failure names both flags.
  EXPECT_TRUE(!(f.avx2 || f.fma || f.f16c) || f.avx);
  EXPECT_TRUE(!f.avx || f.os_saves_ymm);
  EXPECT_TRUE(!f.avx512f || f.os_saves_zmm);
  EXPECT_TRUE(!f.avx512f || f.avx2);  // every AVX-512 CPU shipped has AVX2
  EXPECT_TRUE(!(f.avx512bw || f.avx512vl || f.avx512dq || f.avx512vnni || f.avx512bf16) || f.avx512f);
  EXPECT_TRUE(!f.avx_vnni || f.avx2);
  EXPECT_TRUE(!(f.amx_int8 || f.amx_bf16) || f.amx_tile);
  EXPECT_TRUE(!f.os_saves_zmm || f.os_saves_ymm);
  EXPECT_FALSE(f.brand.empty());
  EXPECT_FALSE(f.vendor.empty());
  EXPECT_GE(f.n_logical_cpus, 1);
  EXPECT_GE(f.n_usable_cpus, 1);
}

TEST(CpuFeatures, AgreesWithLinuxCpuinfo) {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const CpuFeatures f = detect_cpu_features();
  // Linux hides a flag when it does not enable that register state, like our XCR0 masking.
  const std::pair<bool, const char*> pairs[] = {
      {f.sse42, "sse4_2"},           {f.avx, "avx"},
      {f.avx2, "avx2"},              {f.fma, "fma"},
      {f.f16c, "f16c"},              {f.bmi2, "bmi2"},
      {f.avx512f, "avx512f"},        {f.avx512bw, "avx512bw"},
      {f.avx512vl, "avx512vl"},      {f.avx512dq, "avx512dq"},
      {f.avx512vnni, "avx512_vnni"}, {f.avx512bf16, "avx512_bf16"},
      {f.avx_vnni, "avx_vnni"},      {f.amx_tile, "amx_tile"},
      {f.amx_int8, "amx_int8"},      {f.amx_bf16, "amx_bf16"},
  };
  for (const auto& [ours, name] : pairs) EXPECT_EQ(ours, flags.count(name) == 1) << name;
}

TEST(CpuFeatures, CachedCopyMatchesAndCachesAreSane) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(&f, &cpu_features());
  EXPECT_EQ(f.brand, detect_cpu_features().brand);
  EXPECT_EQ(f.avx2, detect_cpu_features().avx2);
  // Unknown sizes are 0; known ones are in a plausible range and ordered.
  const auto in = [](size_t x, size_t lo, size_t hi) { return x == 0 || (x >= lo && x <= hi); };
  EXPECT_TRUE(in(f.l1d_bytes, 4096, size_t{1} << 20)) << f.l1d_bytes;
  EXPECT_TRUE(in(f.l2_bytes, size_t{64} << 10, size_t{64} << 20)) << f.l2_bytes;
  EXPECT_TRUE(in(f.l3_bytes, size_t{1} << 20, size_t{8} << 30)) << f.l3_bytes;
  EXPECT_TRUE(f.l1d_bytes == 0 || f.l2_bytes == 0 || f.l1d_bytes < f.l2_bytes);
}

TEST(CpuFeatures, FeatureListNamesUsableFlags) {
  const CpuFeatures f = avx2_machine();
  EXPECT_EQ(feature_list(f), "sse4.2 avx avx2 fma f16c bmi2");
  EXPECT_EQ(feature_list(CpuFeatures{}), "");
  const std::string all = feature_list(avx512_machine());
  EXPECT_NE(all.find("avx512vnni"), std::string::npos);
  EXPECT_NE(all.find("avx512bf16"), std::string::npos);
}

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  EXPECT_EQ(parse_isa("AVX2"), Isa::Avx2);
  EXPECT_EQ(parse_isa(" avx512 "), Isa::Avx512);
}

TEST(Isa, ParseRejectsUnknownNames) {
  for (const char* bad : {"", "avx", "avx-512", "sse2", "avx512f", "native"}) {
    try {
      parse_isa(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected scalar, avx2 or avx512"), std::string::npos) << e.what();
    }
  }
}

TEST(Isa, BestIsaNeedsEveryFeature) {
  EXPECT_EQ(best_isa(CpuFeatures{}), Isa::Scalar);
  EXPECT_EQ(best_isa(avx2_machine()), Isa::Avx2);
  EXPECT_EQ(best_isa(avx512_machine()), Isa::Avx512);

  CpuFeatures skylake_x = avx512_machine();  // AVX-512 without VNNI/BF16
  skylake_x.avx512vnni = skylake_x.avx512bf16 = false;
  EXPECT_EQ(best_isa(skylake_x), Isa::Avx2);
  EXPECT_EQ(missing_features(Isa::Avx512, skylake_x), "avx512vnni avx512bf16");

  CpuFeatures no_f16c = avx2_machine();
  no_f16c.f16c = false;
  EXPECT_EQ(best_isa(no_f16c), Isa::Scalar);
  EXPECT_EQ(missing_features(Isa::Avx2, no_f16c), "f16c");
  EXPECT_TRUE(isa_supported(Isa::Scalar, CpuFeatures{}));
}

TEST(Isa, SelectHonoursOverride) {
  const CpuFeatures f = avx512_machine();
  EXPECT_EQ(select_isa(std::nullopt, f), Isa::Avx512);
  EXPECT_EQ(select_isa("", f), Isa::Avx512);  // LUMEN_ISA= (empty) means unset
  EXPECT_EQ(select_isa("scalar", f), Isa::Scalar);
  EXPECT_EQ(select_isa("avx2", f), Isa::Avx2);
  EXPECT_EQ(select_isa("avx512", f), Isa::Avx512);
  EXPECT_EQ(select_isa(std::nullopt, avx2_machine()), Isa::Avx2);
}

TEST(Isa, SelectRejectsUnknownOrUnsupported) {
  try {
    select_isa("fast", avx512_machine());
    ADD_FAILURE() << "accepted LUMEN_ISA=fast";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LUMEN_ISA=fast"), std::string::npos) << e.what();
  }
  try {
    select_isa("avx512", avx2_machine());
    ADD_FAILURE() << "accepted avx512 on an AVX2 machine";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("LUMEN_ISA=avx512"), std::string::npos) << msg;
    EXPECT_NE(msg.find("avx512vnni"), std::string::npos) << msg;
    EXPECT_NE(msg.find("best available: avx2"), std::string::npos) << msg;
  }
  EXPECT_THROW(select_isa("avx2", CpuFeatures{}), Error);
}

TEST(Isa, ThisMachine) {
  const Isa best = best_isa();
  EXPECT_TRUE(isa_supported(best, cpu_features()));
  const char* env = std::getenv("LUMEN_ISA");
  if (env == nullptr || env[0] == '\0') {
    EXPECT_EQ(active_isa(), best);
  } else {
    try {  // a run with LUMEN_ISA set: whatever it picks must be runnable
      EXPECT_TRUE(isa_supported(active_isa(), cpu_features()));
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace lumen
