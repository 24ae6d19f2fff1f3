// AVX-512 attention tile (kernels/attention.h): keys in blocks of 64 positions, online softmax
// per query row. For each block the K/V rows of the tile's KV head are fetched and staged once
// (widened to F32 when the cache holds F16, zero-padded to 16 floats) and used by every query
// row of the tile. Scores come 16 keys at a time: 16 dot-product accumulators over the head
// dimension, folded into one vector of 16 scores by a fixed shuffle tree. Every step a row
// takes depends only on that row (its query, its key count), never on the other rows of the
// tile, so a query gets the same bits in decode and in prefill. Free of library inline code
// (no std:: containers or algorithms).
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn about
// it once inlined; silence that here, before the headers are read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/avx512/vec_math_avx512.h"

namespace lumen {
namespace {

using avx512::tail_mask;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// v[0..15] -> one vector whose lane j is the sum of v[j]'s lanes.
inline __m512 fold16(const __m512* v) {
  __m512 w[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 u[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    const __m512d x = _mm512_castps_pd(w[2 * i]), y = _mm512_castps_pd(w[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
}

struct Row {  // one query row's running state
  float* o;   // output accumulator, dvp floats
  float* m;   // running max
  float* l;   // running sum of exp
};

// Adds keys [0, nk) of the current block to one query row. The block's K and V rows are staged
// in kbuf / vbuf, dkp / dvp floats apart (multiples of 16, zero-padded), so row j's chunk c is
// at a fixed offset: with kDkp a compile-time constant (0: use dkp) the 16 key rows of a
// sub-block are addressed from one base register.
template <int64_t kDkp>
void row_block(const float* q, int64_t dk, int64_t dkp_rt, int64_t dvp, float scale, const float* kbuf,
               const float* vbuf, int64_t nk, const Row& r, float* pbuf) {
  const int64_t dkp = kDkp ? kDkp : dkp_rt;
  __m512 s[kAttentionKeyBlock / 16];
  __m512 mx = _mm512_set1_ps(-__builtin_inff());
  const int64_t n_sub = (nk + 15) / 16;
  for (int64_t sb = 0; sb < n_sub; sb++) {
    // Keys past nk read stale (finite or zero) rows of the staging buffer; their lanes are
    // masked to -inf below and never reach the output.
    const float* kb = kbuf + sb * 16 * dkp;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int jj = 0; jj < 16; jj++) acc[jj] = _mm512_setzero_ps();
    for (int64_t c = 0; c < dkp; c += 16) {
      const __m512 qc = _mm512_maskz_loadu_ps(tail_mask(dk - c), q + c);
#pragma GCC unroll 16
      for (int jj = 0; jj < 16; jj++) acc[jj] = _mm512_fmadd_ps(qc, _mm512_load_ps(kb + jj * dkp + c), acc[jj]);
    }
    const __mmask16 valid = tail_mask(nk - sb * 16);
    s[sb] = _mm512_mask_blend_ps(valid, _mm512_set1_ps(-__builtin_inff()), _mm512_mul_ps(fold16(acc), _mm512_set1_ps(scale)));
    mx = _mm512_max_ps(mx, s[sb]);
  }
  const float m_old = *r.m;
  const float bm = avx512::hmax(mx);
  const float m_new = m_old > bm ? m_old : bm;
  const float alpha = avx512::exp1(m_old - m_new);  // 0 on the first block (m_old = -inf)
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 psum = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_sub; sb++) {
    const __m512 pv = avx512::exp(_mm512_sub_ps(s[sb], vm));
    psum = _mm512_add_ps(psum, pv);
    _mm512_store_ps(pbuf + 16 * sb, pv);
  }
  *r.l = *r.l * alpha + avx512::hsum(psum);
  *r.m = m_new;
  // o = o * alpha + sum_j p_j v_j, 64 floats of the head at a time; even and odd keys go to
  // separate accumulators (eight FMA chains), summed at the end.
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t c0 = 0; c0 < dvp; c0 += 64) {
    const int64_t n_vec = (dvp - c0) / 16 < 4 ? (dvp - c0) / 16 : 4;
    __m512 e[4], f[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++) {
      e[x] = x < n_vec ? _mm512_mul_ps(_mm512_load_ps(r.o + c0 + 16 * x), va) : va;
      f[x] = _mm512_setzero_ps();
    }
    const float* v = vbuf + c0;
    int64_t j = 0;
    for (; j + 2 <= nk; j += 2, v += 2 * dvp) {
      const __m512 p0 = _mm512_set1_ps(pbuf[j]), p1 = _mm512_set1_ps(pbuf[j + 1]);
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        if (x < n_vec) {
          e[x] = _mm512_fmadd_ps(p0, _mm512_load_ps(v + 16 * x), e[x]);
          f[x] = _mm512_fmadd_ps(p1, _mm512_load_ps(v + dvp + 16 * x), f[x]);
        }
    }
    if (j < nk) {
      const __m512 p0 = _mm512_set1_ps(pbuf[j]);
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        if (x < n_vec) e[x] = _mm512_fmadd_ps(p0, _mm512_load_ps(v + 16 * x), e[x]);
    }
#pragma GCC unroll 4
    for (int x = 0; x < 4; x++)
      if (x < n_vec) _mm512_store_ps(r.o + c0 + 16 * x, _mm512_add_ps(e[x], f[x]));
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
  for (int64_t i = 0; i < n; i += 16)
    _mm512_store_ps(dst + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n - i), src + i)));
}

void stage(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) _mm512_store_ps(dst + i, _mm512_maskz_loadu_ps(tail_mask(n - i), src + i));
}

}  // namespace

void attention_tile_avx512(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
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
    for (int64_t c = 0; c < dvp; c += 16) _mm512_store_ps(o + r * dvp + c, _mm512_setzero_ps());
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
      const __m512 inv = _mm512_set1_ps(1.0f / ls[r]);
      float* dst = qs.out + qs.rows[i] * qs.ldo + (hk * group + g) * dv;
      for (int64_t c = 0; c < dv; c += 16)
        _mm512_mask_storeu_ps(dst + c, tail_mask(dv - c), _mm512_mul_ps(_mm512_load_ps(o + r * dvp + c), inv));
    }
}

}  // namespace lumen
