// AVX-512 attention tile (kernels/attention.h): kernels/generic/attention_tile.h's skeleton with
// AVX-512's row pass. K is staged transposed (a row of 64 keys per dimension, V row-major): a
// query's heads of the group are processed up to 4 at a time, every K and V load feeds up to 4
// rows, and scores come out 64 keys at a time with no horizontal sums (32 ZMM registers hold 4
// rows x 4 accumulators; AVX2's 16 do not, so it keeps the row-major dot products). A
// block-type K stays int8, transposed 4 quants at a time, and meets the queries' Q8_0 in
// vpdpbusd: a quarter of the transposes and of the multiply instructions of the float path.
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn about
// it once inlined; silence that here, before the headers are read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/attention_tile.h"

namespace lumen {
namespace {

using attention_tile::round16;
using attention_tile::Row;
using Stage = attention_tile::Stage<avx512::Vf>;

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

// Columns [c0, c0 + 16 NV) of R rows' outputs: o = o * alpha + sum over keys [lo, nk) of p_j v_j,
// V's vectors read through vs.load(key, column); [lo, nk) is the union of the rows' keys, a
// row's p_j 0 outside its own (its o unchanged: o + 0 * v is o).
template <int R, int NV, class VS>
inline void pv_chunk(const Row* rows, const __m512* alpha, const VS& vs, int64_t c0, int64_t lo, int64_t nk,
                     const float* pbuf) {
  constexpr int64_t B = kAttentionKeyBlock;
  __m512 e[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < NV; x++) e[r][x] = _mm512_mul_ps(_mm512_load_ps(rows[r].o + c0 + 16 * x), alpha[r]);
  for (int64_t j = lo; j < nk; j++) {
    __m512 vv[NV];
#pragma GCC unroll 4
    for (int x = 0; x < NV; x++) vv[x] = vs.load(j, c0 + 16 * x);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      const __m512 pj = _mm512_set1_ps(pbuf[r * B + j]);
#pragma GCC unroll 4
      for (int x = 0; x < NV; x++) e[r][x] = _mm512_fmadd_ps(pj, vv[x], e[r][x]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int x = 0; x < NV; x++) _mm512_store_ps(rows[r].o + c0 + 16 * x, e[r][x]);
}

struct StagedV {  // V staged as F32 rows dvp floats apart
  const float* buf;
  int64_t dvp;
  __m512 load(int64_t j, int64_t c) const { return _mm512_load_ps(buf + j * dvp + c); }
};
template <class L>
struct InPlaceV {  // V read from the cache's slices (whole vectors: v_in_place wants dv % 16 == 0)
  const uint8_t* const* rows;
  __m512 load(int64_t j, int64_t c) const { return L::full(rows[j], c); }
};

// o = o * alpha + sum_j p_j v_j for R rows, 64 floats of the head at a time; each V load serves
// R rows.
template <int R, class VS>
void pv(const Row* rows, const __m512* alpha, const VS& vs, int64_t dvp, int64_t lo, int64_t nk, const float* pbuf) {
  for (int64_t c0 = 0; c0 < dvp; c0 += 64) {
    switch ((dvp - c0) / 16) {  // vectors of this chunk, a constant in each loop: no branches per key
      case 1: pv_chunk<R, 1>(rows, alpha, vs, c0, lo, nk, pbuf); break;
      case 2: pv_chunk<R, 2>(rows, alpha, vs, c0, lo, nk, pbuf); break;
      case 3: pv_chunk<R, 3>(rows, alpha, vs, c0, lo, nk, pbuf); break;
      default: pv_chunk<R, 4>(rows, alpha, vs, c0, lo, nk, pbuf); break;
    }
  }
}

// The unscaled scores of R rows (acc: 4 vectors of 16 keys each, zeroed) against a float K
// staged transposed (kt: dk rows of 64 keys): for each dimension d, the 4 vectors of 64 keys
// meet every row's q[d] broadcast, so a K load serves R rows and no horizontal sums are needed.
template <int R>
void scores_f32(const float* const* q, int64_t dk, const float* kt, __m512 (*acc)[4], attention_tile::Ahead& pf,
                int64_t share) {
  constexpr int64_t B = kAttentionKeyBlock;
  const int64_t per_d = (share + dk - 1) / dk;
  for (int64_t d = 0; d < dk; d++) {
    pf.lines(per_d);
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
}

// stage_k_q8's layout of a block-type K in kbuf (nblk 32-element blocks): dword column c's
// 16-key group g, and block b's scales of group g.
template <class F>  // float or const float
F* kq_column(F* kbuf, int64_t c, int64_t g) { return kbuf + (c * 4 + g) * 16; }
template <class F>
F* kq_scales(F* kbuf, int64_t nblk, int64_t b, int64_t g) { return kbuf + (nblk * 8 * 4 + b * 4 + g) * 16; }

// The same against a block-type K staged as int8 (stage_k_q8's layout), the rows' queries
// rounded to Q8_0 (attention_q8_view of q[r]): per 32-element block, each 16-key vector's
// integer dots come from 8 vpdpbusd of its unsigned quants with a broadcast of 4 of the row's
// (started at -bias * sum(q): Q8_0's quants are stored + 128, Q4_0's nibbles carry their 8),
// then acc += float(dot) * (d_k * d_q), block by block as the reference sums them. Two
// 16-key vectors at a time: 4 rows x 2 integer and 4 x 4 float accumulators fit the registers.
template <int R>
void scores_q8(const float* const* q, int64_t dk, const float* kbuf, int bias, __m512 (*acc)[4],
               attention_tile::Ahead& pf, int64_t share) {
  const int64_t nblk = (dk + 31) / 32;
  QueryQ8 qq[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) qq[r] = attention_q8_view(q[r], dk);
  const int64_t per = (share + 2 * nblk - 1) / (2 * nblk);
  for (int g2 = 0; g2 < 4; g2 += 2)
    for (int64_t b = 0; b < nblk; b++) {
      pf.lines(per);
      __m512i dot[R][2];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) dot[r][0] = dot[r][1] = _mm512_set1_epi32(-bias * qq[r].sum[b]);
#pragma GCC unroll 8
      for (int c = 0; c < 8; c++) {
        const auto* col = reinterpret_cast<const __m512i*>(kq_column(kbuf, b * 8 + c, g2));
        const __m512i k0 = _mm512_load_si512(col), k1 = _mm512_load_si512(col + 1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
          int32_t q4;
          __builtin_memcpy(&q4, qq[r].qs + b * 32 + 4 * c, 4);
          const __m512i qd = _mm512_set1_epi32(q4);
          dot[r][0] = _mm512_dpbusd_epi32(dot[r][0], k0, qd);
          dot[r][1] = _mm512_dpbusd_epi32(dot[r][1], k1, qd);
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        const __m512 dkv = _mm512_load_ps(kq_scales(kbuf, nblk, b, g2 + h));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
          acc[r][g2 + h] = _mm512_add_ps(
              acc[r][g2 + h], _mm512_mul_ps(_mm512_cvtepi32_ps(dot[r][h]), _mm512_mul_ps(dkv, _mm512_set1_ps(qq[r].d[b]))));
      }
    }
}

// R query rows (1..4: heads that share this KV head, of one query or of consecutive ones), each
// against its keys [rows[r].lo, rows[r].nk) of the staged block (the others masked): K as its
// stager left it in kbuf (scores_f32 or scores_q8), V row-major (values: staged rows of dvp
// floats, or the cache's slices). Every row's operations are the same whatever the other rows
// are, so results do not depend on the tile (decode = prefill, bit for bit). The score loop
// prefetches `share` lines of the next block (attention_tile::Ahead).
template <int R>
void rows_block(const float* const* q, const AttentionParams& p, const float* kbuf,
                const attention_tile::Values& values, const Row* rows, float* pbuf, attention_tile::Ahead& ahead,
                int64_t share) {
  constexpr int64_t B = kAttentionKeyBlock;
  const int64_t dvp = round16(p.head_dim_v);
  const float scale = p.scale, softcap = p.softcap;
  __m512 acc[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int sb = 0; sb < 4; sb++) acc[r][sb] = _mm512_setzero_ps();
  attention_tile::Ahead pf = ahead;  // a local copy: its cursor stays in registers
  if (!kv_k_meets_q8(p.k_type)) scores_f32<R>(q, p.head_dim_k, kbuf, acc, pf, share);
  else scores_q8<R>(q, p.head_dim_k, kbuf, p.k_type == GgmlType::Q8_0 ? 128 : 8, acc, pf, share);
  ahead = pf;
  const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-__builtin_inff());
  int64_t lo = rows[0].lo, nk = rows[0].nk;  // the union of the rows' keys
  __m512 alpha[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    lo = rows[r].lo < lo ? rows[r].lo : lo;
    nk = rows[r].nk > nk ? rows[r].nk : nk;
    // Bit j: key j is in the row's [lo, nk) (lo < nk <= 64).
    const uint64_t below_nk = rows[r].nk >= 64 ? ~uint64_t{0} : (uint64_t{1} << rows[r].nk) - 1;
    const uint64_t keys = below_nk & ~((uint64_t{1} << rows[r].lo) - 1);
    // Keys outside [lo, nk) hold stale (or never staged) values, or belong to another row: their
    // lanes become -inf, weigh exactly 0 (exp(-inf)) and never reach the output.
    __m512 mx = ninf;
#pragma GCC unroll 4
    for (int sb = 0; sb < 4; sb++) {
      const __mmask16 valid = static_cast<__mmask16>(keys >> (16 * sb));
      __m512 sc = _mm512_mul_ps(acc[r][sb], vscale);
      if (softcap > 0.0f)
        sc = _mm512_mul_ps(_mm512_set1_ps(softcap),
                           avx512::tanh(_mm512_mul_ps(sc, _mm512_set1_ps(1.0f / softcap))));
      acc[r][sb] = _mm512_mask_blend_ps(valid, ninf, sc);
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
  if (!values.rows) return pv<R>(rows, alpha, StagedV{values.staged, dvp}, dvp, lo, nk, pbuf);
  switch (values.type) {
    case GgmlType::F16: return pv<R>(rows, alpha, InPlaceV<Stage::LoadF16>{values.rows}, dvp, lo, nk, pbuf);
    case GgmlType::BF16: return pv<R>(rows, alpha, InPlaceV<Stage::LoadBF16>{values.rows}, dvp, lo, nk, pbuf);
    default: return pv<R>(rows, alpha, InPlaceV<Stage::LoadF32>{values.rows}, dvp, lo, nk, pbuf);
  }
}

using RowsBlockFn = void (*)(const float* const*, const AttentionParams&, const float*, const attention_tile::Values&,
                             const Row*, float*, attention_tile::Ahead&, int64_t);
constexpr RowsBlockFn kRowsBlock[5] = {nullptr, rows_block<1>, rows_block<2>, rows_block<3>, rows_block<4>};

// K: keys [lo, nb) of the block (the slices fetched), transposed into kt: dk rows of 64 keys,
// element c of each slice at kt[c * 64 + key]. Groups of 16 keys outside [lo, nb) are left as
// they are (stale): the rows mask those keys.
using StageKFn = attention_tile::RowsFn;

template <class L>
void stage_k(GgmlType, const uint8_t* const* k_rows, int64_t lo, int64_t nb, int64_t dk, float* kt) {
  constexpr int64_t B = kAttentionKeyBlock;
  __m512 r[16];
  for (int64_t j0 = lo / 16 * 16; j0 < nb; j0 += 16) {
    for (int64_t c = 0; c < dk; c += 16) {
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++)
        r[i] = j0 + i >= lo && j0 + i < nb ? L::load(k_rows[j0 + i], c, dk - c) : _mm512_setzero_ps();
      transpose16(r);
      const int64_t n = dk - c < 16 ? dk - c : 16;
      for (int64_t i = 0; i < n; i++) _mm512_store_ps(kt + (c + i) * B + j0, r[i]);
    }
  }
}

// A block-type K (Q8_0: 34-byte blocks, Q4_0: 18) staged as int8 for scores_q8: for each dword
// column c (elements 4c..4c+3 of a slice, 8 per 32-element block) and 16-key group g, 64 bytes
// at (c * 4 + g) * 64: the 16 keys' unsigned quants of the column (Q8_0's q + 128, Q4_0's
// nibbles), transposed from the slices two blocks at a time; after the nblk * 8 columns, per
// block b and group g the 16 keys' scales as floats. Keys of a staged group outside [lo, nb)
// get zero quants and scales; groups outside it are left stale (the rows mask those keys).
template <bool kQ4>
void stage_k_q8(GgmlType, const uint8_t* const* k_rows, int64_t lo, int64_t nb, int64_t dk, float* kbuf) {
  constexpr int64_t kBytes = kQ4 ? 18 : 34;
  const int64_t nblk = (dk + 31) / 32;
  for (int64_t j0 = lo / 16 * 16; j0 < nb; j0 += 16) {
    const int64_t g = j0 / 16;
    for (int64_t b = 0; b < nblk; b += 2) {
      const bool two = b + 1 < nblk;
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) {
        __m512i v = _mm512_setzero_si512();
        if (j0 + i >= lo && j0 + i < nb) {
          const uint8_t* q0 = k_rows[j0 + i] + b * kBytes + 2;
          if constexpr (kQ4) {
            __m256i x = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0)));
            if (two) x = _mm256_inserti128_si256(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q0 + kBytes)), 1);
            const __m256i m4 = _mm256_set1_epi8(0x0f);
            // Lanes [b's 0..15, b+1's 0..15, b's 16..31, b+1's 16..31] -> elements in order.
            v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(x, m4)),
                                   _mm256_and_si256(_mm256_srli_epi16(x, 4), m4), 1);
            v = _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));
          } else {
            v = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0)));
            if (two) v = _mm512_inserti64x4(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0 + kBytes)), 1);
            v = _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
          }
        }
        r[i] = _mm512_castsi512_ps(v);
      }
      transpose16(r);  // dword k of each key -> column b * 8 + k
      for (int k = 0; k < (two ? 16 : 8); k++) _mm512_store_ps(kq_column(kbuf, b * 8 + k, g), r[k]);
      for (int64_t bb = b; bb < b + (two ? 2 : 1); bb++) {
        alignas(32) uint16_t d[16] = {};
        for (int i = 0; i < 16; i++)
          if (j0 + i >= lo && j0 + i < nb) __builtin_memcpy(&d[i], k_rows[j0 + i] + bb * kBytes, 2);
        _mm512_store_ps(kq_scales(kbuf, nblk, bb, g), _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d))));
      }
    }
  }
}

// The stager of a tile's K slices: the element types transposed straight from the cache as
// floats, the block types as int8. (attention() refuses other types; Stage::any names them.)
StageKFn k_stager(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return stage_k<Stage::LoadF32>;
    case GgmlType::F16: return stage_k<Stage::LoadF16>;
    case GgmlType::BF16: return stage_k<Stage::LoadBF16>;
    case GgmlType::Q8_0: return stage_k_q8<false>;
    case GgmlType::Q4_0: return stage_k_q8<true>;
    default: return Stage::rows<Stage::any>;
  }
}

struct Attn {
  static constexpr int kRows = 4;
  static constexpr bool kQ8 = true;
  static StageKFn stage_k_for(GgmlType t) { return k_stager(t); }
  // V's element types are read in place when a block has at most two row passes (decode: a
  // group of up to 8 heads): converting a vector at each of two reads costs less than staging
  // it (a conversion, a store and two loads). TinyLlama's decode attention, cache-resident, one
  // thread: 54 -> 46 us per layer at 576 keys. Block types stay staged (a scale per 32
  // elements), as do many passes (prefill).
  static bool v_in_place(GgmlType t, int64_t dv, int64_t passes) {
    return passes <= 2 && dv % 16 == 0 && (t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::F32);
  }
  static void rows_block(int nr, const float* const* q, const AttentionParams& p, const float* kbuf,
                         const attention_tile::Values& values, const Row* rows, float* pbuf,
                         attention_tile::Ahead& ahead, int64_t share) {
    kRowsBlock[nr](q, p, kbuf, values, rows, pbuf, ahead, share);
  }
};

}  // namespace

const AttentionKernels kAttentionAvx512 = {attention_tile::tile<avx512::Vf, Attn>, attention_tile::merge<avx512::Vf>};

}  // namespace lumen
