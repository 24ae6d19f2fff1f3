// CPUID/XGETBV feature detection. Bit positions are from the Intel SDM (CPUID leaf 1, leaf 7
// sub-leaves 0 and 1) and the AMD APM (extended leaves); XCR0 bits from the XSAVE chapter.
#include "kernels/cpu_features.h"

#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <utility>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LUMEN_X86 1
#else
#define LUMEN_X86 0
#endif

namespace lumen {
namespace {

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

bool bit(uint32_t reg, int n) { return ((reg >> n) & 1u) != 0; }

#if LUMEN_X86
uint32_t max_leaf(uint32_t base) {
  Regs r;
  __cpuid(base, r.eax, r.ebx, r.ecx, r.edx);
  return r.eax;
}

// Leaf/sub-leaf query; all zeros when the leaf is beyond the CPU's maximum.
Regs cpuid(uint32_t leaf, uint32_t subleaf = 0) {
  Regs r;
  const uint32_t top = max_leaf(leaf & 0x80000000u);
  if (leaf > top) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

// XGETBV(0) = XCR0. The instruction only exists when CPUID.1:ECX.OSXSAVE is set; inline asm
// rather than _xgetbv() because this file is built without -mxsave.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#endif

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\n\r");
  return s.substr(first, last - first + 1);
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return trim(line);
}

// sysfs sizes look like "48K", "1024K", "32768K" or "32M".
size_t parse_size(const std::string& text) {
  size_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; i++) value = value * 10 + (text[i] - '0');
  if (i == 0) return 0;
  if (i < text.size()) {
    if (text[i] == 'K') value <<= 10;
    else if (text[i] == 'M') value <<= 20;
    else if (text[i] == 'G') value <<= 30;
  }
  return value;
}

// Linux's view of cpu0's caches; instances are per core/CCX as the kernel sees them.
void caches_from_sysfs(CpuFeatures& f) {
  for (int index = 0; index < 8; index++) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string level = read_line(dir + "/level");
    if (level.empty()) break;
    const std::string type = read_line(dir + "/type");
    const size_t size = parse_size(read_line(dir + "/size"));
    if (level == "1" && type == "Data") f.l1d_bytes = size;
    else if (level == "2" && type != "Instruction") f.l2_bytes = size;
    else if (level == "3" && type != "Instruction") f.l3_bytes = size;
  }
}

#if LUMEN_X86
// Deterministic cache parameters: leaf 4 (Intel) and 0x8000001D (AMD with TOPOEXT) share a
// layout. size = ways * partitions * line size * sets.
void caches_from_cpuid_leaf(CpuFeatures& f, uint32_t leaf) {
  for (uint32_t sub = 0; sub < 16; sub++) {
    const Regs r = cpuid(leaf, sub);
    const uint32_t type = r.eax & 0x1f;  // 0 none, 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    if (type == 2) continue;
    const uint32_t level = (r.eax >> 5) & 0x7;
    const size_t size = size_t{((r.ebx >> 22) & 0x3ff) + 1u} * (((r.ebx >> 12) & 0x3ff) + 1u) *
                        ((r.ebx & 0xfff) + 1u) * (size_t{r.ecx} + 1u);
    if (level == 1 && f.l1d_bytes == 0) f.l1d_bytes = size;
    if (level == 2 && f.l2_bytes == 0) f.l2_bytes = size;
    if (level == 3 && f.l3_bytes == 0) f.l3_bytes = size;
  }
}

void caches_from_cpuid(CpuFeatures& f, bool is_amd) {
  if (is_amd) {
    caches_from_cpuid_leaf(f, 0x8000001Du);
    // Legacy AMD leaves, for CPUs (or hypervisors) without leaf 0x8000001D.
    const Regs l1 = cpuid(0x80000005u);
    const Regs l23 = cpuid(0x80000006u);
    if (f.l1d_bytes == 0) f.l1d_bytes = size_t{l1.ecx >> 24} << 10;
    if (f.l2_bytes == 0) f.l2_bytes = size_t{l23.ecx >> 16} << 10;
    if (f.l3_bytes == 0) f.l3_bytes = size_t{l23.edx >> 18} * (512u << 10);
  } else {
    caches_from_cpuid_leaf(f, 4);
  }
}
#endif

int count_usable_cpus(int fallback) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return fallback;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : fallback;
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  f.n_logical_cpus = online > 0 ? static_cast<int>(online) : 1;
  f.n_usable_cpus = count_usable_cpus(f.n_logical_cpus);

#if LUMEN_X86
  const Regs r0 = cpuid(0);
  char vendor[13] = {};
  for (int i = 0; i < 4; i++) {
    vendor[i] = static_cast<char>(r0.ebx >> (8 * i));
    vendor[4 + i] = static_cast<char>(r0.edx >> (8 * i));
    vendor[8 + i] = static_cast<char>(r0.ecx >> (8 * i));
  }
  f.vendor = vendor;

  const Regs r1 = cpuid(1);
  const Regs r7 = cpuid(7, 0);
  const Regs r7_1 = r7.eax >= 1 ? cpuid(7, 1) : Regs{};

  uint64_t xcr0 = 0;
  if (bit(r1.ecx, 27)) xcr0 = read_xcr0();  // OSXSAVE
  // YMM needs XMM (bit 1) and YMM-high (bit 2) state; ZMM adds opmask, ZMM_Hi256, Hi16_ZMM
  // (bits 5-7); AMX needs XTILECFG and XTILEDATA (bits 17-18).
  f.os_saves_ymm = (xcr0 & 0x6) == 0x6;
  f.os_saves_zmm = f.os_saves_ymm && (xcr0 & 0xe0) == 0xe0;
  f.os_saves_tiles = (xcr0 & 0x60000) == 0x60000;

  f.sse42 = bit(r1.ecx, 20);
  f.bmi2 = bit(r7.ebx, 8);
  f.avx = bit(r1.ecx, 28) && f.os_saves_ymm;
  f.fma = bit(r1.ecx, 12) && f.avx;
  f.f16c = bit(r1.ecx, 29) && f.avx;
  f.avx2 = bit(r7.ebx, 5) && f.avx;
  f.avx_vnni = bit(r7_1.eax, 4) && f.avx2;
  f.avx512f = bit(r7.ebx, 16) && f.os_saves_zmm;
  f.avx512dq = bit(r7.ebx, 17) && f.avx512f;
  f.avx512bw = bit(r7.ebx, 30) && f.avx512f;
  f.avx512vl = bit(r7.ebx, 31) && f.avx512f;
  f.avx512vnni = bit(r7.ecx, 11) && f.avx512f;
  f.avx512bf16 = bit(r7_1.eax, 5) && f.avx512f;
  f.amx_tile = bit(r7.edx, 24) && f.os_saves_tiles;
  f.amx_int8 = bit(r7.edx, 25) && f.amx_tile;
  f.amx_bf16 = bit(r7.edx, 22) && f.amx_tile;

  if (max_leaf(0x80000000u) >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; i++) {
      const Regs r = cpuid(0x80000002u + i);
      const uint32_t words[4] = {r.eax, r.ebx, r.ecx, r.edx};
      for (int w = 0; w < 4; w++)
        for (int b = 0; b < 4; b++) brand[i * 16 + w * 4 + b] = static_cast<char>(words[w] >> (8 * b));
    }
    f.brand = trim(brand);
  }
  if (f.brand.empty()) f.brand = f.vendor;
#endif

  caches_from_sysfs(f);
#if LUMEN_X86
  if (f.l1d_bytes == 0 || f.l2_bytes == 0 || f.l3_bytes == 0) caches_from_cpuid(f, f.vendor == "AuthenticAMD");
#endif
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect_cpu_features();
  return features;
}

std::string feature_list(const CpuFeatures& f) {
  const std::pair<bool, const char*> flags[] = {
      {f.sse42, "sse4.2"},         {f.avx, "avx"},           {f.avx2, "avx2"},
      {f.fma, "fma"},              {f.f16c, "f16c"},         {f.bmi2, "bmi2"},
      {f.avx_vnni, "avx-vnni"},    {f.avx512f, "avx512f"},   {f.avx512bw, "avx512bw"},
      {f.avx512vl, "avx512vl"},    {f.avx512dq, "avx512dq"}, {f.avx512vnni, "avx512vnni"},
      {f.avx512bf16, "avx512bf16"}, {f.amx_tile, "amx-tile"}, {f.amx_int8, "amx-int8"},
      {f.amx_bf16, "amx-bf16"},
  };
  std::string out;
  for (const auto& [on, name] : flags) {
    if (!on) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out;
}

}  // namespace lumen
