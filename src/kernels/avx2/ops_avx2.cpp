// AVX2 element-wise ops (kernels/ops.h). Free of library inline code: anything instantiated
// here would carry AVX2 into baseline callers (hence no std::vector, std::sqrt, ...). Tails run
// through a zero-padded 8-lane buffer so they take the same path as full vectors.
#include <immintrin.h>

#include <cstring>

#include "kernels/avx2/vec_math_avx2.h"
#include "kernels/ops_isa.h"
#include "kernels/ref/ops_ref.h"

namespace lumen {
namespace avx2 {
namespace {

struct Tail {  // up to 8 floats copied into (and out of) an aligned, zero-padded vector
  alignas(32) float v[8] = {};
  __m256 load(const float* p, int64_t n) {
    std::memcpy(v, p, static_cast<size_t>(n) * 4);
    return _mm256_load_ps(v);
  }
  void store(float* p, __m256 x, int64_t n) {
    _mm256_store_ps(v, x);
    std::memcpy(p, v, static_cast<size_t>(n) * 4);
  }
};

// A product the compiler may not fuse with a following add or subtract (GCC contracts
// arithmetic into FMA by default in C++): RoPE must round each product like the reference.
inline __m256 mul_rounded(__m256 a, __m256 b) {
  __m256 p = _mm256_mul_ps(a, b);
  __asm__("" : "+x"(p));
  return p;
}

inline __m256 load_n(const float* p, int64_t n) {  // n in 1..8; missing lanes zero
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(n));
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = load_n(x + i, n - i);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    s0 = _mm256_fmadd_pd(lo, lo, s0);
    s1 = _mm256_fmadd_pd(hi, hi, s1);
  }
  const double sum = avx2::hsum(_mm256_add_pd(s0, s1));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const __m256 scale = _mm256_set1_ps(1.0f / __builtin_sqrtf(mean + eps));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, v);
  }
  if (i < n) {
    Tail tx, tw;
    __m256 v = _mm256_mul_ps(tx.load(x + i, n - i), scale);
    if (w) v = _mm256_mul_ps(v, tw.load(w + i, n - i));
    tx.store(y + i, v, n - i);
  }
}

// Angles from the reference, products rounded before the add/sub: bit-identical rotations.
void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const RopeParams& p) {
  const int64_t half = p.n_rot / 2;
  if (half > 256) return ref::rope(x, n_heads, head_dim, pos, p);
  alignas(32) float c[256 + 8], s[256 + 8];
  ref::rope_angles(pos, p, c, s);
  if (p.neox) {  // pairs (i, i + half)
    for (int64_t h = 0; h < n_heads; h++) {
      float* v = x + h * head_dim;
      for (int64_t i = 0; i < half; i += 8) {
        const int64_t n = half - i < 8 ? half - i : 8;
        Tail ta, tb, tc, ts;
        const __m256 a = ta.load(v + i, n), b = tb.load(v + half + i, n);
        const __m256 cv = tc.load(c + i, n), sv = ts.load(s + i, n);
        ta.store(v + i, _mm256_sub_ps(mul_rounded(a, cv), mul_rounded(b, sv)), n);
        tb.store(v + half + i, _mm256_add_ps(mul_rounded(a, sv), mul_rounded(b, cv)), n);
      }
    }
    return;
  }
  // Adjacent pairs (2i, 2i + 1): even lanes a*c - b*s, odd lanes b*c + a*s (= a*s + b*c).
  alignas(32) float cd[512], sd[512];
  for (int64_t i = 0; i < half; i++) cd[2 * i] = cd[2 * i + 1] = c[i], sd[2 * i] = sd[2 * i + 1] = s[i];
  const int64_t n_rot = 2 * half;
  const __m256 sign = _mm256_castsi256_ps(_mm256_setr_epi32(static_cast<int>(0x80000000u), 0, static_cast<int>(0x80000000u), 0,
                                                            static_cast<int>(0x80000000u), 0, static_cast<int>(0x80000000u), 0));
  for (int64_t h = 0; h < n_heads; h++) {
    float* v = x + h * head_dim;
    int64_t i = 0;
    for (; i + 8 <= n_rot; i += 8) {
      const __m256 a = _mm256_loadu_ps(v + i);
      const __m256 ac = mul_rounded(a, _mm256_load_ps(cd + i));
      const __m256 bs = mul_rounded(_mm256_permute_ps(a, 0xb1), _mm256_load_ps(sd + i));
      // ac - bs on even lanes (adding the negated product is the same rounding), ac + bs on odd.
      _mm256_storeu_ps(v + i, _mm256_add_ps(ac, _mm256_xor_ps(bs, sign)));
    }
    if (i < n_rot) {  // 2, 4 or 6 values left
      Tail t;
      const __m256 a = t.load(v + i, n_rot - i);
      const __m256 ac = mul_rounded(a, _mm256_load_ps(cd + i));
      const __m256 bs = mul_rounded(_mm256_permute_ps(a, 0xb1), _mm256_load_ps(sd + i));
      t.store(v + i, _mm256_add_ps(ac, _mm256_xor_ps(bs, sign)), n_rot - i);
    }
  }
}

void softmax(float* x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = ninf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
  float max = avx2::hmax(mx);
  for (int64_t j = i; j < n; j++) max = x[j] > max ? x[j] : max;
  const __m256 vmax = _mm256_set1_ps(max);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  auto accumulate = [&](__m256 e) {
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  };
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    accumulate(e);
  }
  if (i < n) {
    Tail t;
    __m256 e = avx2::exp(_mm256_sub_ps(t.load(x + i, n - i), vmax));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(tail_mask(n - i)));  // padding lanes add nothing
    t.store(x + i, e, n - i);
    accumulate(e);
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / avx2::hsum(_mm256_add_pd(s0, s1))));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; i++) x[i] *= _mm256_cvtss_f32(inv);
}

inline __m256 silu_mul(__m256 g, __m256 u) {
  const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, silu_mul(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    Tail tg, tu;
    const __m256 r = silu_mul(tg.load(gate + i, n - i), tu.load(up + i, n - i));
    tg.store(out + i, r, n - i);
  }
}

void vec_add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; i++) out[i] = a[i] + b[i];
}

}  // namespace
}  // namespace avx2

const OpsTable kOpsAvx2 = {"avx2", avx2::rms_norm, avx2::rope, avx2::softmax, avx2::swiglu, avx2::vec_add};

}  // namespace lumen
