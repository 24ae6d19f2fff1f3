// AVX-512 attention tile (kernels/attention.h): keys in blocks of 64 positions, online softmax
// per query row. For each block the K/V slices of the tile's KV head are fetched and staged once
// (dequantized to F32 in registers): K transposed (a row of 64 keys per dimension), V
// row-major. A query's heads of the group are then processed up to 4 at a time: every K and V
// load feeds up to 4 rows, and scores come out 64 keys at a time with no horizontal sums.
// Every step a row takes depends only on that row (its query, its key range [kv_begin, n_kv))
// and on which chunk of its group it is in, never on the other queries of the tile, so a query
// gets the same bits in decode and in prefill. Free of library inline code (no std::
// containers or algorithms).
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn about
// it once inlined; silence that here, before the headers are read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/avx512/simd_avx512.h"

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

// R query rows (1..4: heads of one query that share this KV head) against keys [lo, nk) of the
// staged block (the others are masked). K is staged transposed (kt: dk rows of 64 keys), V
// row-major (vbuf: rows of dvp).
// Scores: for each dimension d, the 4 vectors of 64 keys meet every row's q[d] broadcast, so a
// K load serves R rows and no horizontal sums are needed. Every row's operations are the same
// whatever the other rows are, and a query's heads are always split into the same R-chunks, so
// results do not depend on the tile (decode = prefill, bit for bit).
template <int R>
void rows_block(const float* const* q, int64_t dk, int64_t dvp, float scale, const float* kt, const float* vbuf,
                int64_t lo, int64_t nk, const Row* rows, float* pbuf) {
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
  // Bit j: key j is in [lo, nk) (lo < nk <= 64).
  const uint64_t keys = (nk >= 64 ? ~uint64_t{0} : (uint64_t{1} << nk) - 1) & ~((uint64_t{1} << lo) - 1);
  __m512 alpha[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    // Keys outside [lo, nk) hold stale (or never staged) values: their lanes become -inf and
    // never reach the output.
    __m512 mx = ninf;
#pragma GCC unroll 4
    for (int sb = 0; sb < 4; sb++) {
      const __mmask16 valid = static_cast<__mmask16>(keys >> (16 * sb));
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
    const float* v = vbuf + lo * dvp + c0;
    for (int64_t j = lo; j < nk; j++, v += dvp) {
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
                             int64_t, const Row*, float*);
constexpr RowsBlockFn kRowsBlock[5] = {nullptr, rows_block<1>, rows_block<2>, rows_block<3>, rows_block<4>};

// Loaders of the element types: elements [e, e + min(n, 16)) of a stored slice (n >= 1) as 16
// floats, zero beyond n, the same floats as kv_row_to_float. K is staged straight from them.
struct LoadF32 {
  static __m512 load(const uint8_t* row, int64_t e, int64_t n) {
    return _mm512_maskz_loadu_ps(tail_mask(n), reinterpret_cast<const float*>(row) + e);
  }
};

struct LoadF16 {
  static __m512 load(const uint8_t* row, int64_t e, int64_t n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), reinterpret_cast<const uint16_t*>(row) + e));
  }
};

struct LoadBF16 {  // the 16 bits are a float's upper half
  static __m512 load(const uint8_t* row, int64_t e, int64_t n) {
    const __m256i h = _mm256_maskz_loadu_epi16(tail_mask(n), reinterpret_cast<const uint16_t*>(row) + e);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

// The fp16 scale at the start of a block (unaligned), as 16 floats.
inline __m512 block_scale(const uint8_t* b) {
  uint16_t h;
  __builtin_memcpy(&h, b, 2);
  return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
}

// Q8_0 block (34 bytes): x = d * q, q int8. Half h (elements 16h..16h+15) of block b:
// int8 -> int32 -> float and one multiply by the scale, as to_float.
struct Q8_0Rows {
  static constexpr int64_t kBytes = 34;
  static __m512 half(const uint8_t* b, int64_t h, __m512 d) {
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * h)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
  }
};

// Q4_0 block (18 bytes): x = d * (q - 8); elements 0..15 are the low nibbles of its 16 bytes,
// 16..31 the high ones (a right shift by 4 within 16-bit lanes, then the low nibble).
struct Q4_0Rows {
  static constexpr int64_t kBytes = 18;
  static __m512 half(const uint8_t* b, int64_t h, __m512 d) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i nib = _mm_and_si128(_mm_srl_epi16(bytes, _mm_cvtsi32_si128(static_cast<int>(h) * 4)), _mm_set1_epi8(0x0f));
    const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(nib), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
  }
};

// A head slice of a block type, n elements -> dst, 16 at a time (each one half of a block, the
// scale loaded once per block). The slice is whole blocks padded with zeros (attention.h), so
// the halves past n read its own padding and store the zeros dst's padding wants.
template <class Q>
[[gnu::always_inline]] inline void stage_blocks(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
  const uint8_t* b = slice;
  for (int64_t c = 0; c < n; c += 32, b += Q::kBytes) {
    const __m512 d = block_scale(b);
    _mm512_store_ps(dst + c, Q::half(b, 0, d));
    if (c + 16 < n) _mm512_store_ps(dst + c + 16, Q::half(b, 1, d));
  }
}

// Any other type: the scalar definition (which reports a type it does not know), zero-padded.
void stage_any(GgmlType t, const uint8_t* slice, int64_t n, float* dst) {
  kv_row_to_float(t, slice, 0, n, dst);
  for (int64_t i = n; i < round16(n); i++) dst[i] = 0.0f;
}

using RowStageFn = void (*)(GgmlType t, const uint8_t* slice, int64_t n, float* dst);

// K: keys [lo, nb) of the block (the slices fetched), transposed into kt: dk rows of 64 keys,
// element c of each slice at kt[c * 64 + key]. Groups of 16 keys outside [lo, nb) are left as
// they are (stale): the rows mask those keys. `line` (64 rows of round16(dk) floats) holds block
// types' slices dequantized before the transpose.
using StageKFn = void (*)(GgmlType t, const uint8_t* const* k_rows, int64_t lo, int64_t nb, int64_t dk, float* kt,
                          float* line);

// Transposes the 16-key groups of keys [lo, nb), each slice read through rows.load(key, element,
// count).
template <class Rows>
void transpose_keys(const Rows& rows, int64_t lo, int64_t nb, int64_t dk, float* kt) {
  constexpr int64_t B = kAttentionKeyBlock;
  __m512 r[16];
  for (int64_t j0 = lo / 16 * 16; j0 < nb; j0 += 16) {
    for (int64_t c = 0; c < dk; c += 16) {
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) r[i] = j0 + i >= lo && j0 + i < nb ? rows.load(j0 + i, c, dk - c) : _mm512_setzero_ps();
      transpose16(r);
      const int64_t n = dk - c < 16 ? dk - c : 16;
      for (int64_t i = 0; i < n; i++) _mm512_store_ps(kt + (c + i) * B + j0, r[i]);
    }
  }
}

template <class L>
struct StoredRows {  // the cache's slices of an element type, read in place
  const uint8_t* const* rows;
  __m512 load(int64_t j, int64_t c, int64_t n) const { return L::load(rows[j], c, n); }
};

struct LineRows {  // slices already dequantized into lines of dkp floats
  const float* line;
  int64_t dkp;
  __m512 load(int64_t j, int64_t c, int64_t) const { return _mm512_load_ps(line + j * dkp + c); }
};

template <class L>
void stage_k(GgmlType, const uint8_t* const* k_rows, int64_t lo, int64_t nb, int64_t dk, float* kt, float*) {
  transpose_keys(StoredRows<L>{k_rows}, lo, nb, dk, kt);
}

template <RowStageFn kStage>
void stage_k_lines(GgmlType t, const uint8_t* const* k_rows, int64_t lo, int64_t nb, int64_t dk, float* kt, float* line) {
  const int64_t dkp = round16(dk);
  for (int64_t j = lo; j < nb; j++) kStage(t, k_rows[j], dk, line + j * dkp);
  transpose_keys(LineRows{line, dkp}, lo, nb, dk, kt);
}

// V: slices [lo, nb) of the block row-major into vbuf (rows of dvp floats, zero-padded).
using StageVFn = void (*)(GgmlType t, const uint8_t* const* v_rows, int64_t lo, int64_t nb, int64_t dv, int64_t dvp,
                          float* vbuf);

template <class L>
void stage_v(GgmlType, const uint8_t* const* v_rows, int64_t lo, int64_t nb, int64_t dv, int64_t dvp, float* vbuf) {
  for (int64_t j = lo; j < nb; j++)
    for (int64_t c = 0; c < dvp; c += 16) _mm512_store_ps(vbuf + j * dvp + c, L::load(v_rows[j], c, dv - c));
}

template <RowStageFn kStage>
void stage_v_rows(GgmlType t, const uint8_t* const* v_rows, int64_t lo, int64_t nb, int64_t dv, int64_t dvp, float* vbuf) {
  for (int64_t j = lo; j < nb; j++) kStage(t, v_rows[j], dv, vbuf + j * dvp);
}

// The stagers of a tile's K and V slices.
StageKFn stage_k_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return stage_k<LoadF32>;
    case GgmlType::F16: return stage_k<LoadF16>;
    case GgmlType::BF16: return stage_k<LoadBF16>;
    case GgmlType::Q8_0: return stage_k_lines<stage_blocks<Q8_0Rows>>;
    case GgmlType::Q4_0: return stage_k_lines<stage_blocks<Q4_0Rows>>;
    default: return stage_k_lines<stage_any>;
  }
}

StageVFn stage_v_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return stage_v<LoadF32>;
    case GgmlType::F16: return stage_v<LoadF16>;
    case GgmlType::BF16: return stage_v<LoadBF16>;
    case GgmlType::Q8_0: return stage_v_rows<stage_blocks<Q8_0Rows>>;
    case GgmlType::Q4_0: return stage_v_rows<stage_blocks<Q4_0Rows>>;
    default: return stage_v_rows<stage_any>;
  }
}

// Bytes of a stored slice of n elements (kv_row_bytes: a block type's slice is whole blocks).
size_t slice_bytes(GgmlType t, int64_t n) {
  switch (t) {
    case GgmlType::F16:
    case GgmlType::BF16: return static_cast<size_t>(n) * 2;
    case GgmlType::Q8_0: return static_cast<size_t>((n + 31) / 32) * 34;
    case GgmlType::Q4_0: return static_cast<size_t>((n + 31) / 32) * 18;
    default: return static_cast<size_t>(n) * 4;
  }
}

}  // namespace

void attention_tile_avx512(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                           float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = p.head_dim_v;
  const int64_t dkp = round16(dk), dvp = round16(dv);
  const int64_t n_rows = qs.n_q * group;
  constexpr int64_t B = kAttentionKeyBlock;

  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* o = base;                      // n_rows x dvp
  float* mx = o + n_rows * dvp;         // n_rows
  float* ls = mx + round16(n_rows);     // n_rows
  float* kt = ls + round16(n_rows);     // dkp x B (K transposed)
  float* vbuf = kt + B * dkp;           // B x dvp
  float* pbuf = vbuf + B * dvp;         // 4 x B
  float* kline = pbuf + 4 * B;          // B x dkp: block types' K rows before the transpose
  auto** k_rows = reinterpret_cast<const uint8_t**>(kline + B * dkp);
  const uint8_t** v_rows = k_rows + B;
  const uint8_t** k_next = v_rows + B;  // the next block's rows, fetched one block ahead
  const uint8_t** v_next = k_next + B;
  const StageKFn stage_k = stage_k_for(p.k_type);
  const StageVFn stage_v = stage_v_for(p.v_type);

  int64_t max_kv = 0, min_begin = qs.kv_begin && qs.n_q > 0 ? qs.kv_begin[0] : 0;
  for (int64_t i = 0; i < qs.n_q; i++) {
    max_kv = qs.n_kv[i] > max_kv ? qs.n_kv[i] : max_kv;
    if (qs.kv_begin && qs.kv_begin[i] < min_begin) min_begin = qs.kv_begin[i];
  }
  for (int64_t r = 0; r < n_rows; r++) {
    mx[r] = -__builtin_inff();
    ls[r] = 0.0f;
    for (int64_t c = 0; c < dvp; c += 16) _mm512_store_ps(o + r * dvp + c, _mm512_setzero_ps());
  }

  // The next block's head slices are prefetched while this block is computed (the loads of the
  // staging were the tile's main stall; a cache block's slices of one head are contiguous, but
  // consecutive cache blocks need not be).
  const size_t k_len = slice_bytes(p.k_type, dk), v_len = slice_bytes(p.v_type, dv);
  auto prefetch_rows = [&](int64_t n) {
    for (int64_t j = 0; j < n; j++) {
      for (size_t b = 0; b < k_len; b += 64) _mm_prefetch(reinterpret_cast<const char*>(k_next[j] + b), _MM_HINT_T0);
      for (size_t b = 0; b < v_len; b += 64) _mm_prefetch(reinterpret_cast<const char*>(v_next[j] + b), _MM_HINT_T0);
    }
  };
  // Blocks stay aligned to multiples of B from position 0 whatever the tile's queries, so a
  // query sees the same blocks alone and in a tile; positions below min_begin are never fetched
  // (only the first block can start below it).
  const int64_t j_first = min_begin / B * B;
  if (j_first < max_kv) {
    const int64_t lo = min_begin - j_first;
    kv.fetch(kv.ctx, min_begin, min64(B, max_kv - j_first) - lo, hk, k_next + lo, v_next + lo);
  }
  for (int64_t j0 = j_first; j0 < max_kv; j0 += B) {
    const int64_t nb = min64(B, max_kv - j0);
    const int64_t lo = min_begin > j0 ? min_begin - j0 : 0;
    for (int64_t j = lo; j < nb; j++) k_rows[j] = k_next[j], v_rows[j] = v_next[j];
    if (j0 + B < max_kv) {
      const int64_t nn = min64(B, max_kv - j0 - B);
      kv.fetch(kv.ctx, j0 + B, nn, hk, k_next, v_next);
      prefetch_rows(nn);
    }
    // This KV head's slice of every fetched row of the block, dequantized to F32, once for all
    // the tile's query rows.
    stage_k(p.k_type, k_rows, lo, nb, dk, kt, kline);
    stage_v(p.v_type, v_rows, lo, nb, dv, dvp, vbuf);
    for (int64_t i = 0; i < qs.n_q; i++) {
      const int64_t begin = qs.kv_begin ? qs.kv_begin[i] : 0;
      const int64_t k_lo = begin > j0 ? begin - j0 : 0, nk = min64(nb, qs.n_kv[i] - j0);
      if (nk <= k_lo) continue;
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
        kRowsBlock[nr](q, dk, dvp, p.scale, kt, vbuf, k_lo, nk, rows, pbuf);
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
