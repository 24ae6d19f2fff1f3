#include "kernels/isa.h"

#include <cstdlib>

#include "core/error.h"

namespace lumen {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

Isa parse_isa(std::string_view name) {
  const auto first = name.find_first_not_of(" \t");
  const auto last = name.find_last_not_of(" \t");
  std::string lower;
  if (first != std::string_view::npos) {
    for (char c : name.substr(first, last - first + 1))
      lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (lower == isa_name(isa)) return isa;
  fail("unknown ISA '{}': expected scalar, avx2 or avx512", name);
}

std::string missing_features(Isa isa, const CpuFeatures& f) {
  std::string out;
  auto need = [&](bool have, const char* feature) {
    if (have) return;
    if (!out.empty()) out += ' ';
    out += feature;
  };
  if (isa == Isa::Avx2 || isa == Isa::Avx512) {
    need(f.avx2, "avx2");
    need(f.fma, "fma");
    need(f.f16c, "f16c");
  }
  if (isa == Isa::Avx512) {
    need(f.avx512f, "avx512f");
    need(f.avx512bw, "avx512bw");
    need(f.avx512vl, "avx512vl");
    need(f.avx512dq, "avx512dq");
    need(f.avx512vnni, "avx512vnni");
    need(f.avx512bf16, "avx512bf16");
  }
  return out;
}

bool isa_supported(Isa isa, const CpuFeatures& f) { return missing_features(isa, f).empty(); }

Isa best_isa(const CpuFeatures& f) {
  if (isa_supported(Isa::Avx512, f)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2, f)) return Isa::Avx2;
  return Isa::Scalar;
}

Isa best_isa() { return best_isa(cpu_features()); }

Isa select_isa(std::optional<std::string_view> override_value, const CpuFeatures& f) {
  if (!override_value || override_value->empty()) return best_isa(f);
  Isa isa;
  try {
    isa = parse_isa(*override_value);
  } catch (const Error& e) {
    fail("LUMEN_ISA={}: {}", *override_value, e.what());
  }
  const std::string missing = missing_features(isa, f);
  if (!missing.empty())
    fail("LUMEN_ISA={}: this CPU ({}) cannot run {} kernels, it lacks {} (best available: {})",
         *override_value, f.brand, isa_name(isa), missing, isa_name(best_isa(f)));
  return isa;
}

Isa active_isa() {
  static const Isa isa = [] {
    const char* value = std::getenv("LUMEN_ISA");
    return select_isa(value ? std::optional<std::string_view>(value) : std::nullopt, cpu_features());
  }();
  return isa;
}

}  // namespace lumen
