// AVX2 attention tile (kernels/attention.h): the AVX-512 tile's algorithm with 8-lane
// vectors. Keys in blocks of 64 positions, online softmax per query row; each block's K/V
// rows of the tile's KV head are fetched and staged once (widened to F32 when the cache holds
// F16, zero-padded) and used by every query row; scores 8 keys at a time (8 dot-product accumulators folded by a
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

// Adds keys [0, nk) of the current block to one query row; K and V rows staged in kbuf / vbuf
// dkp / dvp floats apart (multiples of 16, zero-padded). kDkp: dkp as a compile-time constant
// (0: use dkp_rt), so the 8 key rows of a sub-block are addressed from one base register.
template <int64_t kDkp>
void row_block(const float* q, int64_t dk, int64_t dkp_rt, int64_t dvp, float scale, const float* kbuf,
               const float* vbuf, int64_t nk, const Row& r, float* pbuf) {
  const int64_t dkp = kDkp ? kDkp : dkp_rt;
  __m256 s[kAttentionKeyBlock / 8];
  const int64_t n_sub = (nk + 7) / 8;
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = ninf;
  for (int64_t sb = 0; sb < n_sub; sb++) {
    // Keys past nk read stale (finite or zero) rows of the staging buffer; their lanes are
    // masked to -inf below and never reach the output.
    const float* kb = kbuf + sb * 8 * dkp;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int jj = 0; jj < 8; jj++) acc[jj] = _mm256_setzero_ps();
    for (int64_t c = 0; c < dkp; c += 8) {
      const __m256 qc = c + 8 <= dk ? _mm256_loadu_ps(q + c)
                        : c < dk    ? _mm256_maskload_ps(q + c, tail_mask(dk - c))
                                    : _mm256_setzero_ps();
#pragma GCC unroll 8
      for (int jj = 0; jj < 8; jj++) acc[jj] = _mm256_fmadd_ps(qc, _mm256_load_ps(kb + jj * dkp + c), acc[jj]);
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
  // o = o * alpha + sum_j p_j v_j, 32 floats of the head at a time; even and odd keys go to
  // separate accumulators (eight FMA chains), summed at the end.
  const __m256 va = _mm256_set1_ps(alpha);
  for (int64_t c0 = 0; c0 < dvp; c0 += 32) {
    const int64_t n_vec = (dvp - c0) / 8 < 4 ? (dvp - c0) / 8 : 4;
    __m256 e[4], f[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) {
      e[x] = x < n_vec ? _mm256_mul_ps(_mm256_load_ps(r.o + c0 + 8 * x), va) : va;
      f[x] = _mm256_setzero_ps();
    }
    const float* v = vbuf + c0;
    int64_t j = 0;
    for (; j + 2 <= nk; j += 2, v += 2 * dvp) {
      const __m256 p0 = _mm256_set1_ps(pbuf[j]), p1 = _mm256_set1_ps(pbuf[j + 1]);
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        if (x < n_vec) {
          e[x] = _mm256_fmadd_ps(p0, _mm256_load_ps(v + 8 * x), e[x]);
          f[x] = _mm256_fmadd_ps(p1, _mm256_load_ps(v + dvp + 8 * x), f[x]);
        }
    }
    if (j < nk) {
      const __m256 p0 = _mm256_set1_ps(pbuf[j]);
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        if (x < n_vec) e[x] = _mm256_fmadd_ps(p0, _mm256_load_ps(v + 8 * x), e[x]);
    }
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      if (x < n_vec) _mm256_store_ps(r.o + c0 + 8 * x, _mm256_add_ps(e[x], f[x]));
  }
}

using RowBlockFn = void (*)(const float*, int64_t, int64_t, int64_t, float, const float*, const float*, int64_t,
                            const Row&, float*);

RowBlockFn row_block_for(int64_t dkp) {
  switch (dkp) {
    case 64: return row_block<64>;
    case 128: return row_block<128>;
    default: return row_block<0>;
  }
}

// n values at src (halves or floats) -> floats at dst, zero-padded to a multiple of 16.
void stage(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    alignas(16) uint16_t tmp[8] = {};
    for (int64_t j = i; j < n; j++) tmp[j - i] = src[j];
    _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp))));
    i += 8;
  }
  if (i < round16(n)) _mm256_store_ps(dst + i, _mm256_setzero_ps());
}

void stage(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_store_ps(dst + i, _mm256_loadu_ps(src + i));
  if (i < n) {
    _mm256_store_ps(dst + i, _mm256_maskload_ps(src + i, tail_mask(n - i)));
    i += 8;
  }
  if (i < round16(n)) _mm256_store_ps(dst + i, _mm256_setzero_ps());
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
  const RowBlockFn row_fn = row_block_for(dkp);

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
    // This KV head's slice of every row of the block, widened to F32 and padded, once for all
    // the tile's query rows.
    for (int64_t j = 0; j < nb; j++) {
      if (f16) {
        stage(reinterpret_cast<const uint16_t*>(k_rows[j]) + hk * dk, kbuf + j * dkp, dk);
        stage(reinterpret_cast<const uint16_t*>(v_rows[j]) + hk * dv, vbuf + j * dvp, dv);
      } else {
        stage(reinterpret_cast<const float*>(k_rows[j]) + hk * dk, kbuf + j * dkp, dk);
        stage(reinterpret_cast<const float*>(v_rows[j]) + hk * dv, vbuf + j * dvp, dv);
      }
    }
    for (int64_t i = 0; i < qs.n_q; i++) {
      const int64_t nk = min64(nb, qs.n_kv[i] - j0);
      if (nk <= 0) continue;
      for (int64_t g = 0; g < group; g++) {
        const int64_t r = i * group + g;
        const float* q = qs.q + qs.rows[i] * qs.ldq + (hk * group + g) * dk;
        row_fn(q, dk, dkp, dvp, p.scale, kbuf, vbuf, nk, Row{o + r * dvp, mx + r, ls + r}, pbuf);
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
