// AVX2 attention tile (kernels/attention.h): the AVX-512 tile's algorithm with 8-lane
// vectors. Keys in blocks of 64 positions, online softmax per query row; each block's K/V
// rows of the tile's KV head are fetched once (widened to F32 when the cache holds F16) and
// used by every query row; scores 8 keys at a time (8 dot-product accumulators folded by a
// fixed shuffle tree). A row's steps depend only on that row, so a query gets the same bits in
// decode and in prefill. Free of library inline code (no std:: containers or algorithms).
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/avx2/vec_math_avx2.h"

namespace lumen {
namespace {

using avx2::tail_mask;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// 8 floats at p, or the first `left` of them (zero beyond) when left < 8.
inline __m256 load8(const float* p, int64_t left) {
  return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(left));
}

// v[0..7] -> one vector whose lane j is the sum of v[j]'s lanes.
inline __m256 fold8(const __m256* v) {
  __m256 w[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++)
    w[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m256 u[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    const __m256d x = _mm256_castps_pd(w[2 * i]), y = _mm256_castps_pd(w[2 * i + 1]);
    u[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
  }
  return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20), _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

struct Row {
  float* o;
  float* m;
  float* l;
};

void row_block(const float* q, int64_t dk, int64_t dv, float scale, const float* const* kp, const float* const* vp,
               int64_t nk, const Row& r, float* pbuf) {
  __m256 s[kAttentionKeyBlock / 8];
  const int64_t n_sub = (nk + 7) / 8;
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = ninf;
  for (int64_t sb = 0; sb < n_sub; sb++) {
    __m256 acc[8];
    const float* kr[8];
#pragma GCC unroll 8
    for (int jj = 0; jj < 8; jj++) {  // keys past nk reuse the last row; their lanes are masked
      kr[jj] = kp[min64(sb * 8 + jj, nk - 1)];
      acc[jj] = _mm256_setzero_ps();
    }
    for (int64_t c = 0; c < dk; c += 8) {
      const __m256 qc = load8(q + c, dk - c);
#pragma GCC unroll 8
      for (int jj = 0; jj < 8; jj++) acc[jj] = _mm256_fmadd_ps(qc, load8(kr[jj] + c, dk - c), acc[jj]);
    }
    const __m256 valid = _mm256_castsi256_ps(tail_mask(nk - sb * 8));
    s[sb] = _mm256_blendv_ps(ninf, _mm256_mul_ps(fold8(acc), _mm256_set1_ps(scale)), valid);
    mx = _mm256_max_ps(mx, s[sb]);
  }
  const float m_old = *r.m;
  const float bm = avx2::hmax(mx);
  const float m_new = m_old > bm ? m_old : bm;
  const float alpha = avx2::exp1(m_old - m_new);  // 0 on the first block (m_old = -inf)
  const __m256 vm = _mm256_set1_ps(m_new);
  __m256 psum = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n_sub; sb++) {
    const __m256 pv = avx2::exp(_mm256_sub_ps(s[sb], vm));
    psum = _mm256_add_ps(psum, pv);
    _mm256_store_ps(pbuf + 8 * sb, pv);
  }
  *r.l = *r.l * alpha + avx2::hsum(psum);
  *r.m = m_new;
  // o = o * alpha + sum_j p_j v_j, four 8-wide chunks of the head at a time. The output row
  // is padded to a multiple of 16 floats, so whole-vector loads and stores stay inside it.
  const __m256 va = _mm256_set1_ps(alpha);
  for (int64_t c0 = 0; c0 < dv; c0 += 32) {
    const int64_t n_chunks = min64(4, (dv - c0 + 7) / 8);
    __m256 o[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) o[x] = x < n_chunks ? _mm256_mul_ps(_mm256_load_ps(r.o + c0 + 8 * x), va) : va;
    for (int64_t j = 0; j < nk; j++) {
      const __m256 pj = _mm256_set1_ps(pbuf[j]);
      const float* v = vp[j] + c0;
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        if (x < n_chunks) o[x] = _mm256_fmadd_ps(pj, load8(v + 8 * x, dv - c0 - 8 * x), o[x]);
    }
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      if (x < n_chunks) _mm256_store_ps(r.o + c0 + 8 * x, o[x]);
  }
}

void widen(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    alignas(16) uint16_t tmp[8] = {};
    for (int64_t j = i; j < n; j++) tmp[j - i] = src[j];
    _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp))));
  }
}

}  // namespace

void attention_tile_avx2(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                         float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = p.head_dim_v;
  const int64_t dkp = round16(dk), dvp = round16(dv);
  const int64_t n_rows = qs.n_q * group;
  const bool f16 = p.kv_type == GgmlType::F16;
  constexpr int64_t B = kAttentionKeyBlock;

  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* o = base;                      // n_rows x dvp
  float* mx = o + n_rows * dvp;         // n_rows
  float* ls = mx + round16(n_rows);     // n_rows
  float* kbuf = ls + round16(n_rows);   // B x dkp
  float* vbuf = kbuf + B * dkp;         // B x dvp
  float* pbuf = vbuf + B * dvp;         // B
  auto** k_rows = reinterpret_cast<const uint8_t**>(pbuf + B);
  const uint8_t** v_rows = k_rows + B;
  auto** kp = reinterpret_cast<const float**>(v_rows + B);
  const float** vp = kp + B;

  int64_t max_kv = 0;
  for (int64_t i = 0; i < qs.n_q; i++) max_kv = qs.n_kv[i] > max_kv ? qs.n_kv[i] : max_kv;
  for (int64_t r = 0; r < n_rows; r++) {
    mx[r] = -__builtin_inff();
    ls[r] = 0.0f;
    for (int64_t c = 0; c < dvp; c += 8) _mm256_store_ps(o + r * dvp + c, _mm256_setzero_ps());
  }

  for (int64_t j0 = 0; j0 < max_kv; j0 += B) {
    const int64_t nb = min64(B, max_kv - j0);
    kv.fetch(kv.ctx, j0, nb, k_rows, v_rows);
    for (int64_t j = 0; j < nb; j++) {
      if (f16) {
        widen(reinterpret_cast<const uint16_t*>(k_rows[j]) + hk * dk, kbuf + j * dkp, dk);
        widen(reinterpret_cast<const uint16_t*>(v_rows[j]) + hk * dv, vbuf + j * dvp, dv);
        kp[j] = kbuf + j * dkp;
        vp[j] = vbuf + j * dvp;
      } else {
        kp[j] = reinterpret_cast<const float*>(k_rows[j]) + hk * dk;
        vp[j] = reinterpret_cast<const float*>(v_rows[j]) + hk * dv;
      }
    }
    for (int64_t i = 0; i < qs.n_q; i++) {
      const int64_t nk = min64(nb, qs.n_kv[i] - j0);
      if (nk <= 0) continue;
      for (int64_t g = 0; g < group; g++) {
        const int64_t r = i * group + g;
        const float* q = qs.q + qs.rows[i] * qs.ldq + (hk * group + g) * dk;
        row_block(q, dk, dv, p.scale, kp, vp, nk, Row{o + r * dvp, mx + r, ls + r}, pbuf);
      }
    }
  }

  for (int64_t i = 0; i < qs.n_q; i++)
    for (int64_t g = 0; g < group; g++) {
      const int64_t r = i * group + g;
      const __m256 inv = _mm256_set1_ps(1.0f / ls[r]);
      float* dst = qs.out + qs.rows[i] * qs.ldo + (hk * group + g) * dv;
      int64_t c = 0;
      for (; c + 8 <= dv; c += 8) _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_load_ps(o + r * dvp + c), inv));
      for (; c < dv; c++) dst[c] = o[r * dvp + c] * _mm256_cvtss_f32(inv);
    }
}

}  // namespace lumen
