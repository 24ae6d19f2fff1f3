// AVX2 attention tile (kernels/attention.h): kernels/generic/attention_tile.h's skeleton with
// AVX2's row pass. K is staged row-major like V (AVX-512 transposes it instead: with 16 YMM
// registers a transposed 64-key block would need 8 accumulators per row and leave too few
// for the K loads of more than one row); a row's scores come 8 keys at a time from 8
// dot-product accumulators folded by a fixed shuffle tree, one row per pass.
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/attention_tile.h"

namespace lumen {
namespace {

using attention_tile::Row;
using avx2::tail_mask;

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

// Adds keys [lo, nk) of the current block to one query row; K and V rows staged in kbuf / vbuf
// dkp / dvp floats apart (multiples of 16, zero-padded). kDkp: dkp as a compile-time constant
// (0: use dkp_rt), so the 8 key rows of a sub-block are addressed from one base register.
template <int64_t kDkp>
void row_block(const float* q, int64_t dk, int64_t dkp_rt, int64_t dvp, float scale, float softcap, const float* kbuf,
               const float* vbuf, int64_t lo, int64_t nk, const Row& r, float* pbuf) {
  const int64_t dkp = kDkp ? kDkp : dkp_rt;
  __m256 s[kAttentionKeyBlock / 8];
  const int64_t sb0 = lo / 8, n_sub = (nk + 7) / 8;
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = ninf;
  for (int64_t sb = sb0; sb < n_sub; sb++) {
    // Keys outside [lo, nk) read stale (or never staged) rows of the staging buffer; their
    // lanes are masked to -inf below and never reach the output.
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
    const __m256 valid = _mm256_castsi256_ps(_mm256_andnot_si256(tail_mask(lo - sb * 8), tail_mask(nk - sb * 8)));
    __m256 sc = _mm256_mul_ps(fold8(acc), _mm256_set1_ps(scale));
    if (softcap > 0.0f)
      sc = _mm256_mul_ps(_mm256_set1_ps(softcap), avx2::tanh(_mm256_mul_ps(sc, _mm256_set1_ps(1.0f / softcap))));
    s[sb] = _mm256_blendv_ps(ninf, sc, valid);
    mx = _mm256_max_ps(mx, s[sb]);
  }
  const float m_old = *r.m;
  const float bm = avx2::hmax(mx);
  const float m_new = m_old > bm ? m_old : bm;
  const float alpha = avx2::exp1(m_old - m_new);  // 0 on the first block (m_old = -inf)
  const __m256 vm = _mm256_set1_ps(m_new);
  __m256 psum = _mm256_setzero_ps();
  for (int64_t sb = sb0; sb < n_sub; sb++) {
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
    const float* v = vbuf + lo * dvp + c0;
    int64_t j = lo;
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

using Stage = attention_tile::Stage<avx2::Vf>;

struct Attn {
  static constexpr int kRows = 1;
  // K row-major, round16(dk) floats per key, like V; a block-type K dequantized too, so it
  // meets the floats of the queries' Q8_0 rounding.
  static constexpr bool kQ8 = false;
  static attention_tile::RowsFn stage_k_for(GgmlType t) { return Stage::rows_for(t); }
  // V always staged: one row per pass makes a group's passes many, each re-reading V.
  static bool v_in_place(GgmlType, int64_t, int64_t) { return false; }
  static void rows_block(int, const float* const* q, const AttentionParams& p, const float* kbuf,
                         const attention_tile::Values& values, const Row* rows, float* pbuf,
                         attention_tile::Ahead& ahead, int64_t share) {
    const int64_t lo = rows[0].lo, nk = rows[0].nk;
    const float* vbuf = values.staged;
    // One row per pass: passes are many (8 per block for a group of 8), so each issues its
    // share of the next block's prefetches up front.
    ahead.lines(share);
    const int64_t dk = p.head_dim_k, dkp = attention_tile::round16(dk), dvp = attention_tile::round16(p.head_dim_v);
    const float scale = p.scale, softcap = p.softcap;
    switch (dkp) {  // the common head sizes with dkp a constant
      case 64: return row_block<64>(q[0], dk, dkp, dvp, scale, softcap, kbuf, vbuf, lo, nk, rows[0], pbuf);
      case 128: return row_block<128>(q[0], dk, dkp, dvp, scale, softcap, kbuf, vbuf, lo, nk, rows[0], pbuf);
      default: return row_block<0>(q[0], dk, dkp, dvp, scale, softcap, kbuf, vbuf, lo, nk, rows[0], pbuf);
    }
  }
};

}  // namespace

const AttentionKernels kAttentionAvx2 = {attention_tile::tile<avx2::Vf, Attn>, attention_tile::merge<avx2::Vf>};

}  // namespace lumen
