// The per-ISA tables behind kernels/ops.h: one set of element-wise ops per instruction-set
// level, chosen by active_isa(). Tests reach every table the machine can run through
// ops_table(isa) and compare it with the scalar reference (kernels/ref/ops_ref.h).
#pragma once

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/ops.h"

namespace lumen {

struct OpsTable {
  const char* name;
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  void (*rope)(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p, const float* cos, const float* sin);
  void (*softmax)(float* x, int64_t n);
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  void (*geglu)(const float* gate, const float* up, float* out, int64_t n);
  void (*soft_cap)(float* x, int64_t n, float cap);
  void (*vec_add)(const float* a, const float* b, float* out, int64_t n);
  int64_t (*argmax)(const float* x, int64_t n);
  void (*to_f16)(const float* x, uint16_t* y, int64_t n);
  void (*to_bf16)(const float* x, uint16_t* y, int64_t n);
  void (*to_q8_0)(const float* x, void* y, int64_t n);
};

extern const OpsTable kOpsScalar;  // the references
extern const OpsTable kOpsAvx2;    // kernels/avx2/ops_avx2.cpp
extern const OpsTable kOpsAvx512;  // kernels/avx512/ops_avx512.cpp

// The table for `isa` (the caller checks the CPU can run it).
const OpsTable& ops_table(Isa isa);

}  // namespace lumen
