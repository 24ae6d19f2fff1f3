// Dispatch of the element-wise ops to the table of the active ISA, chosen once.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "core/quant/quant_ref.h"
#include "kernels/ops_isa.h"
#include "kernels/ref/ops_ref.h"

namespace lumen {

const OpsTable kOpsScalar = {"scalar",      ref::rms_norm, ref::rope_rotate, ref::softmax,  ref::swiglu,
                             ref::geglu,    ref::soft_cap, ref::vec_add,     ref::argmax,   ref::to_f16,
                             ref::to_bf16,  from_float_q8_0};

const OpsTable& ops_table(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return kOpsAvx512;
    case Isa::Avx2: return kOpsAvx2;
    case Isa::Scalar: break;
  }
  return kOpsScalar;
}

namespace {

const OpsTable& active() {
  static const OpsTable& table = ops_table(active_isa());
  return table;
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) { active().rms_norm(x, w, y, n, eps); }
void geglu(const float* gate, const float* up, float* out, int64_t n) { active().geglu(gate, up, out, n); }

void yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float* low,
                    float* high) {
  // The pair whose rotation completes `beta` turns over n_ctx_orig positions (ggml's float steps).
  auto dim = [&](float beta) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(freq_base));
  };
  *low = std::max(0.0f, std::floor(dim(beta_fast)));
  *high = std::min(static_cast<float>(n_rot - 1), std::ceil(dim(beta_slow)));
}

void rope_angles(int32_t pos, const RopeParams& p, float* cos, float* sin) { ref::rope_angles(pos, p, cos, sin); }

void rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p, const float* cos, const float* sin) {
  active().rope(x, n_heads, head_dim, p, cos, sin);
}

void softmax(float* x, int64_t n) { active().softmax(x, n); }

void swiglu(const float* gate, const float* up, float* out, int64_t n) { active().swiglu(gate, up, out, n); }

void soft_cap(float* x, int64_t n, float cap) { active().soft_cap(x, n, cap); }

void vec_add(const float* a, const float* b, float* out, int64_t n) { active().vec_add(a, b, out, n); }

int64_t argmax(const float* x, int64_t n) { return active().argmax(x, n); }

void to_f16(const float* x, uint16_t* y, int64_t n) { active().to_f16(x, y, n); }

void to_bf16(const float* x, uint16_t* y, int64_t n) { active().to_bf16(x, y, n); }

void to_q8_0(const float* x, void* y, int64_t n) { active().to_q8_0(x, y, n); }

}  // namespace lumen
