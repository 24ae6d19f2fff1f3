// What the CPU (and the OS) can run: CPUID feature bits, masked by XGETBV so a flag is only set
// when the OS also saves that register state, plus brand string, CPU count and cache sizes.
// The ISA choice (kernels/isa.h) and the roofline keys are built from this.
#pragma once

#include <cstddef>
#include <string>

namespace lumen {

struct CpuFeatures {
  // Every vector flag below is "usable": the CPUID bit AND the OS support for its register
  // state (XCR0: SSE+AVX state for YMM, plus opmask/ZMM state for AVX-512, tile state for AMX).
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;  // scalar, needs no OS state
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;  // VEX-encoded VNNI (256-bit), e.g. Alder Lake, Zen 5
  // AMX: CPU + XCR0 tile state. Linux additionally requires each process to request the
  // tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM) before the first tile instruction.
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;

  // XCR0 state as read by XGETBV (false when OSXSAVE is off).
  bool os_saves_ymm = false;
  bool os_saves_zmm = false;
  bool os_saves_tiles = false;

  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string brand;   // CPUID brand string, trimmed; vendor when the CPU has none
  int n_logical_cpus = 1;  // online logical CPUs
  int n_usable_cpus = 1;   // CPUs in this process's affinity mask (what threads can use)
  // Per-instance cache sizes in bytes (one L1d/L2 per core, one L3 per CCX/socket); 0 = unknown.
  size_t l1d_bytes = 0;
  size_t l2_bytes = 0;
  size_t l3_bytes = 0;
};

// Runs CPUID/XGETBV and reads sysfs now (cheap, but prefer cpu_features()).
CpuFeatures detect_cpu_features();

// Detected once per process (thread-safe).
const CpuFeatures& cpu_features();

// Space-separated names of the usable flags, e.g. "sse4.2 avx avx2 fma f16c bmi2 avx512f ...".
std::string feature_list(const CpuFeatures& f);

}  // namespace lumen
