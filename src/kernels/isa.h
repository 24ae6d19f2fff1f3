// The instruction-set level lumen's kernels run at. The kernel dispatch table is keyed on
// active_isa(): chosen once per process from CPUID (best_isa()) or the LUMEN_ISA override.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kernels/cpu_features.h"

namespace lumen {

// Ordered: each level needs everything the one below needs.
enum class Isa {
  Scalar,  // baseline x86-64 (SSE2); runs anywhere
  Avx2,    // AVX2 + FMA + F16C (Haswell, Zen 1 and later)
  Avx512,  // AVX-512 F/BW/VL/DQ + VNNI + BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later)
};

// "scalar", "avx2", "avx512": the spelling LUMEN_ISA and the roofline cache use.
const char* isa_name(Isa isa);

// Inverse of isa_name (case-insensitive, surrounding blanks ignored); throws lumen::Error
// naming the value and the accepted spellings.
Isa parse_isa(std::string_view name);

// The CPU features `isa` needs that `f` lacks, space separated; empty when it can run `isa`.
std::string missing_features(Isa isa, const CpuFeatures& f);
bool isa_supported(Isa isa, const CpuFeatures& f);

// The highest level the CPU and OS support.
Isa best_isa(const CpuFeatures& f);
Isa best_isa();

// The LUMEN_ISA rule, separated from the environment for tests: no override (nullopt or an
// empty string) -> best_isa(f); otherwise the named level, which must be one the CPU can run:
// an unknown name or an unsupported level throws lumen::Error, never a silent fallback.
Isa select_isa(std::optional<std::string_view> override_value, const CpuFeatures& f);

// select_isa(getenv("LUMEN_ISA"), cpu_features()), decided once per process (thread-safe).
// Throws lumen::Error on a bad LUMEN_ISA (and again on every later call).
Isa active_isa();

}  // namespace lumen
