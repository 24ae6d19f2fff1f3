// The element-wise ops of kernels/ops.h written once over an ISA's SIMD layer V (avx2::Vf,
// avx512::Vf) and instantiated by that ISA's ops translation unit (kernels/avx*/ops_avx*.cpp),
// compiled with its flags. Every op matches the scalar reference (kernels/ref/ops_ref.cpp):
// RoPE bit for bit (the reference's angles, each product rounded before the add), rms_norm and
// softmax up to the order of their double sums (V::kLanes / 2 lanes, two accumulators).
// Free of library inline code (internal linkage, no std:: templates): anything instantiated
// here would carry the ISA's instructions into baseline callers.
#pragma once

#include <cstdint>

#include "kernels/generic/quantize_act.h"
#include "kernels/ops.h"
#include "kernels/ops_isa.h"
#include "kernels/ref/ops_ref.h"

#define LUMEN_OPS_INLINE static inline __attribute__((always_inline))

namespace lumen::generic_ops {
namespace {

// body.template operator()<kFull>(i, mask) over the vectors of [0, n): whole vectors
// (kFull, plain loads) then the tail (its lanes masked).
template <class V, class Body>
LUMEN_OPS_INLINE void for_vectors(int64_t n, Body&& body) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) body.template operator()<true>(i, V::mask(V::kLanes));
  if (i < n) body.template operator()<false>(i, V::mask(n - i));
}
template <class V, bool kFull>
LUMEN_OPS_INLINE typename V::F load(typename V::M m, const float* p) {
  if constexpr (kFull) return V::loadu(p);
  else return V::load_m(m, p);
}
template <class V, bool kFull>
LUMEN_OPS_INLINE void store(typename V::M m, float* p, typename V::F v) {
  if constexpr (kFull) V::storeu(p, v);
  else V::store_m(p, m, v);
}

template <class V>
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  using F = typename V::F;
  typename V::D s0 = V::zero_d(), s1 = V::zero_d();
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, typename V::M m) {
    const F v = load<V, kFull>(m, x + i);
    s0 = V::fmadd_d(V::lo_d(v), V::lo_d(v), s0);
    s1 = V::fmadd_d(V::hi_d(v), V::hi_d(v), s1);
  });
  const double sum = V::hsum(V::add_d(s0, s1));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const F scale = V::set1(1.0f / __builtin_sqrtf(mean + eps));
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, typename V::M m) {
    F v = V::mul(load<V, kFull>(m, x + i), scale);
    if (w) v = V::mul(v, load<V, kFull>(m, w + i));
    store<V, kFull>(m, y + i, v);
  });
}

template <class V>
void rope(float* x, int64_t n_heads, int64_t head_dim, const RopeParams& p, const float* c, const float* s) {
  using F = typename V::F;
  using M = typename V::M;
  const int64_t half = p.n_rot / 2;
  if (half > 256) return ref::rope_rotate(x, n_heads, head_dim, p, c, s);
  if (p.neox) {  // pairs (i, i + half)
    for (int64_t h = 0; h < n_heads; h++) {
      float* v = x + h * head_dim;
      for_vectors<V>(half, [&]<bool kFull>(int64_t i, M m) {
        const F a = load<V, kFull>(m, v + i), b = load<V, kFull>(m, v + half + i);
        const F cv = load<V, kFull>(m, c + i), sv = load<V, kFull>(m, s + i);
        store<V, kFull>(m, v + i, V::sub(V::mul_rounded(a, cv), V::mul_rounded(b, sv)));
        store<V, kFull>(m, v + half + i, V::add(V::mul_rounded(a, sv), V::mul_rounded(b, cv)));
      });
    }
    return;
  }
  // Adjacent pairs (2i, 2i + 1): angles duplicated per pair; even lanes a*c - b*s, odd lanes
  // b*c + a*s (= the reference's a*s + b*c: addition commutes).
  alignas(64) float cd[512], sd[512];
  for (int64_t i = 0; i < half; i++) cd[2 * i] = cd[2 * i + 1] = c[i], sd[2 * i] = sd[2 * i + 1] = s[i];
  for (int64_t h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    for_vectors<V>(2 * half, [&]<bool kFull>(int64_t i, M m) {
      const F a = load<V, kFull>(m, v + i);
      const F ac = V::mul_rounded(a, V::load(cd + i));
      const F bs = V::mul_rounded(V::swap_pairs(a), V::load(sd + i));
      store<V, kFull>(m, v + i, V::sub_even_add_odd(ac, bs));
    });
  }
}

template <class V>
void softmax(float* x, int64_t n) {
  using F = typename V::F;
  using M = typename V::M;
  F mx = V::set1(-__builtin_inff());
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, M m) {
    mx = V::max(mx, kFull ? V::loadu(x + i) : V::load_m_or(m, x + i, mx));
  });
  const F max = V::set1(V::hmax(mx));
  typename V::D s0 = V::zero_d(), s1 = V::zero_d();
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, M m) {
    F e = vec_math::exp<V>(V::sub(load<V, kFull>(m, x + i), max));
    if constexpr (!kFull) e = V::keep(m, e);  // padding lanes add nothing
    store<V, kFull>(m, x + i, e);
    s0 = V::add_d(s0, V::lo_d(e));
    s1 = V::add_d(s1, V::hi_d(e));
  });
  const F inv = V::set1(static_cast<float>(1.0 / V::hsum(V::add_d(s0, s1))));
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, M m) { store<V, kFull>(m, x + i, V::mul(load<V, kFull>(m, x + i), inv)); });
}

template <class V>
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  using F = typename V::F;
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, typename V::M m) {
    const F g = load<V, kFull>(m, gate + i);
    const F e = vec_math::exp<V>(V::sub(V::zero(), g));
    const F silu = V::div(g, V::add(V::set1(1.0f), e));
    store<V, kFull>(m, out + i, V::mul(silu, load<V, kFull>(m, up + i)));
  });
}

template <class V>
void geglu(const float* gate, const float* up, float* out, int64_t n) {
  using F = typename V::F;
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, typename V::M m) {
    const F g = load<V, kFull>(m, gate + i);
    const F h = V::round_f16(g);
    const F inner = V::mul(V::mul(V::set1(0.79788456080286535588f), h),
                           V::add(V::set1(1.0f), V::mul(V::mul(V::set1(0.044715f), h), h)));
    F y = V::round_f16(V::mul(V::mul(V::set1(0.5f), h), V::add(V::set1(1.0f), vec_math::tanh<V>(inner))));
    // Outside (-10, 10): the input from 10 up, 0 from -10 down (a NaN stays NaN, as in the reference).
    y = V::select_le(V::set1(10.0f), g, g, y);
    y = V::select_le(g, V::set1(-10.0f), V::zero(), y);
    store<V, kFull>(m, out + i, V::mul(y, load<V, kFull>(m, up + i)));
  });
}

template <class V>
void soft_cap(float* x, int64_t n, float cap) {
  using F = typename V::F;
  const F vcap = V::set1(cap), inv = V::set1(1.0f / cap);
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, typename V::M m) {
    const F v = load<V, kFull>(m, x + i);
    const F y = V::mul(vcap, vec_math::tanh<V>(V::mul(v, inv)));
    store<V, kFull>(m, x + i, V::select_le(v, v, y, v));  // a NaN (v <= v false) stays NaN
  });
}

// x rounded to F16 (kBf16: BF16) at y; the tail through a vector's worth of scratch.
template <class V, bool kBf16>
void to_half(const float* x, uint16_t* y, int64_t n) {
  auto put = [](uint16_t* p, typename V::F v) {
    if constexpr (kBf16) V::store_bf16(p, v);
    else V::store_f16(p, v);
  };
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) put(y + i, V::loadu(x + i));
  if (i < n) {
    uint16_t tail[V::kLanes];
    put(tail, V::load_m(V::mask(n - i), x + i));
    for (int64_t j = 0; i + j < n; j++) y[i + j] = tail[j];
  }
}

template <class V>
void vec_add(const float* a, const float* b, float* out, int64_t n) {
  for_vectors<V>(n, [&]<bool kFull>(int64_t i, typename V::M m) {
    store<V, kFull>(m, out + i, V::add(load<V, kFull>(m, a + i), load<V, kFull>(m, b + i)));
  });
}

// The maximum first, then the first index that equals it: the scan's answer without its chain
// of dependent compares (a 32,000-logit scan took ~50k cycles (TSC) a decode step). V::max(v, mx)
// keeps mx where v is NaN, so NaNs are skipped as the scan skips them; a NaN x[0] wins there.
template <class V>
int64_t argmax(const float* x, int64_t n) {
  using F = typename V::F;
  if (!(x[0] == x[0])) return 0;
  F mx = V::set1(x[0]);
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) mx = V::max(V::loadu(x + i), mx);
  float m = V::hmax(mx);
  for (int64_t j = i; j < n; j++)
    if (x[j] > m) m = x[j];
  const F vm = V::set1(m);
  for (i = 0; i + V::kLanes <= n; i += V::kLanes)
    if (const unsigned eq = V::eq_mask(V::loadu(x + i), vm)) return i + __builtin_ctz(eq);
  for (; i < n; i++)
    if (x[i] == m) return i;
  return 0;  // not reached: m is one of x
}

// V's table (kernels/ops_isa.h): what each ISA's ops translation unit defines.
template <class V>
constexpr OpsTable table(const char* name) {
  return {name,       rms_norm<V>,       rope<V>,          softmax<V>,
          swiglu<V>,  geglu<V>,          soft_cap<V>,      vec_add<V>,
          argmax<V>,
          to_half<V, false>,                  // to_f16
          to_half<V, true>,                   // to_bf16
          quantize_act::q8_0_blocks<V>};      // to_q8_0
}

}  // namespace
}  // namespace lumen::generic_ops
