// AVX-512 attention tile (kernels/attention.h): keys in blocks of 64 positions, online softmax
// per query row. For each block the K/V slices of the tile's KV head are fetched and staged once
// (widened to F32 when the cache holds F16): K transposed (a row of 64 keys per dimension), V
// row-major. A query's heads of the group are then processed up to 4 at a time: every K and V
// load feeds up to 4 rows, and scores come out 64 keys at a time with no horizontal sums.
// Every step a row takes depends only on that row (its query, its key count) and on which
// chunk of its group it is in, never on the other queries of the tile, so a query gets the
// same bits in decode and in prefill. Free of library inline code (no std:: containers or
// algorithms).
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

struct Row {  // one query row's running state
  float* o;   // output accumulator, dvp floats
  float* m;   // running max
  float* l;   // running sum of exp
};

// 16 rows of 16 floats (in[i]) -> their transpose (out[j] lane i = in[i] lane j).
inline void transpose16(__m512* r) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    for (int h = 0; h < 2; h++) {
      const __m512d a = _mm512_castps_pd(t[4 * i + h]), b = _mm512_castps_pd(t[4 * i + 2 + h]);
      r[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));      // column 2h of each lane
      r[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));  // column 2h + 1
    }
  }
  // r[4i + k] now holds, for rows 4i..4i+3, columns {k, k+4, k+8, k+12} in its four 128-bit lanes.
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) {
    const __m512 a0 = _mm512_shuffle_f32x4(r[k], r[4 + k], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 a1 = _mm512_shuffle_f32x4(r[k], r[4 + k], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512 b0 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 b1 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], _MM_SHUFFLE(3, 1, 3, 1));
    t[k] = _mm512_shuffle_f32x4(a0, b0, _MM_SHUFFLE(2, 0, 2, 0));       // column k
    t[8 + k] = _mm512_shuffle_f32x4(a0, b0, _MM_SHUFFLE(3, 1, 3, 1));   // column k + 8
    t[4 + k] = _mm512_shuffle_f32x4(a1, b1, _MM_SHUFFLE(2, 0, 2, 0));   // column k + 4
    t[12 + k] = _mm512_shuffle_f32x4(a1, b1, _MM_SHUFFLE(3, 1, 3, 1));  // column k + 12
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

// R query rows (1..4: heads of one query that share this KV head) against the staged block of
// nk keys. K is staged transposed (kt: dk rows of 64 keys), V row-major (vbuf: nk rows of dvp).
// Scores: for each dimension d, the 4 vectors of 64 keys meet every row's q[d] broadcast, so a
// K load serves R rows and no horizontal sums are needed. Every row's operations are the same
// whatever the other rows are, and a query's heads are always split into the same R-chunks, so
// results do not depend on the tile (decode = prefill, bit for bit).
template <int R>
void rows_block(const float* const* q, int64_t dk, int64_t dvp, float scale, const float* kt, const float* vbuf,
                int64_t nk, const Row* rows, float* pbuf) {
  constexpr int64_t B = kAttentionKeyBlock;
  __m512 acc[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int sb = 0; sb < 4; sb++) acc[r][sb] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dk; d++) {
    const float* kd = kt + d * B;
    const __m512 k0 = _mm512_load_ps(kd), k1 = _mm512_load_ps(kd + 16), k2 = _mm512_load_ps(kd + 32),
                 k3 = _mm512_load_ps(kd + 48);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const __m512 qd = _mm512_set1_ps(q[r][d]);
      acc[r][0] = _mm512_fmadd_ps(qd, k0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(qd, k1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(qd, k2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(qd, k3, acc[r][3]);
    }
  }
  const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 alpha[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    // Keys past nk hold stale staged values: their lanes become -inf and never reach the output.
    __m512 mx = ninf;
#pragma GCC unroll 4
    for (int sb = 0; sb < 4; sb++) {
      const __mmask16 valid = nk > 16 * sb ? avx512::tail_mask(nk - 16 * sb) : static_cast<__mmask16>(0);
      acc[r][sb] = _mm512_mask_blend_ps(valid, ninf, _mm512_mul_ps(acc[r][sb], vscale));
      mx = _mm512_max_ps(mx, acc[r][sb]);
    }
    const float m_old = *rows[r].m;
    const float bm = avx512::hmax(mx);
    const float m_new = m_old > bm ? m_old : bm;
    alpha[r] = _mm512_set1_ps(avx512::exp1(m_old - m_new));  // 0 on the first block (m_old = -inf)
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 psum = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int sb = 0; sb < 4; sb++) {
      const __m512 pv = avx512::exp(_mm512_sub_ps(acc[r][sb], vm));
      psum = _mm512_add_ps(psum, pv);
      _mm512_store_ps(pbuf + r * B + 16 * sb, pv);
    }
    *rows[r].l = *rows[r].l * _mm512_cvtss_f32(alpha[r]) + avx512::hsum(psum);
    *rows[r].m = m_new;
  }
  // o = o * alpha + sum_j p_j v_j, 64 floats of the head at a time; each V load serves R rows.
  for (int64_t c0 = 0; c0 < dvp; c0 += 64) {
    const int64_t n_vec = (dvp - c0) / 16 < 4 ? (dvp - c0) / 16 : 4;
    __m512 e[R][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++) e[r][x] = x < n_vec ? _mm512_mul_ps(_mm512_load_ps(rows[r].o + c0 + 16 * x), alpha[r]) : alpha[r];
    const float* v = vbuf + c0;
    for (int64_t j = 0; j < nk; j++, v += dvp) {
      __m512 vv[4];
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++) vv[x] = x < n_vec ? _mm512_load_ps(v + 16 * x) : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) {
        const __m512 pj = _mm512_set1_ps(pbuf[r * B + j]);
#pragma GCC unroll 4
        for (int x = 0; x < 4; x++)
          if (x < n_vec) e[r][x] = _mm512_fmadd_ps(pj, vv[x], e[r][x]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
      for (int x = 0; x < 4; x++)
        if (x < n_vec) _mm512_store_ps(rows[r].o + c0 + 16 * x, e[r][x]);
  }
}

using RowsBlockFn = void (*)(const float* const*, int64_t, int64_t, float, const float*, const float*, int64_t,
                             const Row*, float*);
constexpr RowsBlockFn kRowsBlock[5] = {nullptr, rows_block<1>, rows_block<2>, rows_block<3>, rows_block<4>};

// 16 values of a row at src (halves or floats; n of them, zero beyond) as floats.
inline __m512 load_row16(const uint16_t* src, int64_t n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(avx512::tail_mask(n), src));
}
inline __m512 load_row16(const float* src, int64_t n) { return _mm512_maskz_loadu_ps(avx512::tail_mask(n), src); }

// Stages keys [0, nb) of the block: K transposed into kt (dk rows of 64 keys; keys past nb are
// zero), V row-major into vbuf (rows of dvp floats, zero-padded).
template <typename T>
void stage_block(const uint8_t* const* k_rows, const uint8_t* const* v_rows, int64_t nb, int64_t hk, int64_t dk,
                 int64_t dv, int64_t dvp, float* kt, float* vbuf) {
  constexpr int64_t B = kAttentionKeyBlock;
  __m512 r[16];
  for (int64_t j0 = 0; j0 < B; j0 += 16) {
    for (int64_t c = 0; c < dk; c += 16) {
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++)
        r[i] = j0 + i < nb ? load_row16(reinterpret_cast<const T*>(k_rows[j0 + i]) + hk * dk + c, dk - c)
                           : _mm512_setzero_ps();
      transpose16(r);
      const int64_t rows = dk - c < 16 ? dk - c : 16;
      for (int64_t i = 0; i < rows; i++) _mm512_store_ps(kt + (c + i) * B + j0, r[i]);
    }
  }
  for (int64_t j = 0; j < nb; j++) {
    const T* src = reinterpret_cast<const T*>(v_rows[j]) + hk * dv;
    for (int64_t c = 0; c < dvp; c += 16) _mm512_store_ps(vbuf + j * dvp + c, load_row16(src + c, dv - c));
  }
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
  float* kt = ls + round16(n_rows);     // dkp x B (K transposed)
  float* vbuf = kt + B * dkp;           // B x dvp
  float* pbuf = vbuf + B * dvp;         // 4 x B
  auto** k_rows = reinterpret_cast<const uint8_t**>(pbuf + 4 * B);
  const uint8_t** v_rows = k_rows + B;
  const uint8_t** k_next = v_rows + B;  // the next block's rows, fetched one block ahead
  const uint8_t** v_next = k_next + B;

  int64_t max_kv = 0;
  for (int64_t i = 0; i < qs.n_q; i++) max_kv = qs.n_kv[i] > max_kv ? qs.n_kv[i] : max_kv;
  for (int64_t r = 0; r < n_rows; r++) {
    mx[r] = -__builtin_inff();
    ls[r] = 0.0f;
    for (int64_t c = 0; c < dvp; c += 16) _mm512_store_ps(o + r * dvp + c, _mm512_setzero_ps());
  }

  // Cached K/V rows are gathered a head slice at a time from rows of all KV heads, a pattern
  // the hardware prefetchers do not follow: the next block's slices are prefetched while this
  // block is computed (the loads of the staging were the tile's main stall).
  const size_t esize = f16 ? 2 : 4;
  const size_t k_off = static_cast<size_t>(hk * dk) * esize, k_len = static_cast<size_t>(dk) * esize;
  const size_t v_off = static_cast<size_t>(hk * dv) * esize, v_len = static_cast<size_t>(dv) * esize;
  auto prefetch_rows = [&](int64_t n) {
    for (int64_t j = 0; j < n; j++) {
      for (size_t b = 0; b < k_len; b += 64) _mm_prefetch(reinterpret_cast<const char*>(k_next[j] + k_off + b), _MM_HINT_T0);
      for (size_t b = 0; b < v_len; b += 64) _mm_prefetch(reinterpret_cast<const char*>(v_next[j] + v_off + b), _MM_HINT_T0);
    }
  };
  if (max_kv > 0) kv.fetch(kv.ctx, 0, min64(B, max_kv), k_next, v_next);
  for (int64_t j0 = 0; j0 < max_kv; j0 += B) {
    const int64_t nb = min64(B, max_kv - j0);
    for (int64_t j = 0; j < nb; j++) k_rows[j] = k_next[j], v_rows[j] = v_next[j];
    if (j0 + B < max_kv) {
      const int64_t nn = min64(B, max_kv - j0 - B);
      kv.fetch(kv.ctx, j0 + B, nn, k_next, v_next);
      prefetch_rows(nn);
    }
    // This KV head's slice of every row of the block, widened to F32, once for all the tile's
    // query rows.
    if (f16) stage_block<uint16_t>(k_rows, v_rows, nb, hk, dk, dv, dvp, kt, vbuf);
    else stage_block<float>(k_rows, v_rows, nb, hk, dk, dv, dvp, kt, vbuf);
    for (int64_t i = 0; i < qs.n_q; i++) {
      const int64_t nk = min64(nb, qs.n_kv[i] - j0);
      if (nk <= 0) continue;
      // The query's heads of this group in chunks of up to 4 (always the same chunks).
      for (int64_t g0 = 0; g0 < group; g0 += 4) {
        const int nr = static_cast<int>(min64(4, group - g0));
        const float* q[4];
        Row rows[4];
        for (int k = 0; k < nr; k++) {
          const int64_t r = i * group + g0 + k;
          q[k] = qs.q + qs.rows[i] * qs.ldq + (hk * group + g0 + k) * dk;
          rows[k] = Row{o + r * dvp, mx + r, ls + r};
        }
        kRowsBlock[nr](q, dk, dvp, p.scale, kt, vbuf, nk, rows, pbuf);
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
