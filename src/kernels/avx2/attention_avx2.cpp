// AVX2 attention tile (kernels/attention.h): the AVX-512 tile's algorithm with 8-lane
// vectors. Keys in blocks of 64 positions, online softmax per query row; each block's K/V
// rows of the tile's KV head are fetched and staged once (dequantized to F32 in registers,
// zero-padded) and used by every query row; scores 8 keys at a time (8 dot-product
// accumulators folded by a fixed shuffle tree). A row takes only the keys of its range
// [kv_begin, n_kv) in each block and masks the rest, so a row's steps depend only on that row
// and a query gets the same bits in decode and in prefill. Free of library inline code (no
// std:: containers or algorithms).
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/avx2/simd_avx2.h"

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

// Adds keys [lo, nk) of the current block to one query row; K and V rows staged in kbuf / vbuf
// dkp / dvp floats apart (multiples of 16, zero-padded). kDkp: dkp as a compile-time constant
// (0: use dkp_rt), so the 8 key rows of a sub-block are addressed from one base register.
template <int64_t kDkp>
void row_block(const float* q, int64_t dk, int64_t dkp_rt, int64_t dvp, float scale, const float* kbuf,
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
    s[sb] = _mm256_blendv_ps(ninf, _mm256_mul_ps(fold8(acc), _mm256_set1_ps(scale)), valid);
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

using RowBlockFn = void (*)(const float*, int64_t, int64_t, int64_t, float, const float*, const float*, int64_t,
                            int64_t, const Row&, float*);

RowBlockFn row_block_for(int64_t dkp) {
  switch (dkp) {
    case 64: return row_block<64>;
    case 128: return row_block<128>;
    default: return row_block<0>;
  }
}

inline __m256 f16x8(__m128i h) { return _mm256_cvtph_ps(h); }
// 8 bfloat16 values -> floats: the 16 bits are a float's upper half.
inline __m256 bf16x8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

// n 16-bit values at src (F16 or BF16, widened by Widen) -> floats at dst, zero-padded to a
// multiple of 16.
template <__m256 (*Widen)(__m128i)>
void stage_halves(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_store_ps(dst + i, Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    alignas(16) uint16_t tmp[8] = {};
    for (int64_t j = i; j < n; j++) tmp[j - i] = src[j];
    _mm256_store_ps(dst + i, Widen(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp))));
    i += 8;
  }
  if (i < round16(n)) _mm256_store_ps(dst + i, _mm256_setzero_ps());
}

// n floats at src -> dst, zero-padded to a multiple of 16.
void stage(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_store_ps(dst + i, _mm256_loadu_ps(src + i));
  if (i < n) {
    _mm256_store_ps(dst + i, _mm256_maskload_ps(src + i, tail_mask(n - i)));
    i += 8;
  }
  if (i < round16(n)) _mm256_store_ps(dst + i, _mm256_setzero_ps());
}

// The fp16 scale at the start of a block (unaligned), as 8 floats.
inline __m256 block_scale(const uint8_t* b) {
  uint16_t h;
  __builtin_memcpy(&h, b, 2);
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

// A head slice of n elements of the stager's type -> floats at dst, zero-padded to a multiple of
// 16. The same floats as kv_row_to_float.
using RowStageFn = void (*)(GgmlType t, const uint8_t* slice, int64_t n, float* dst);

void stage_f32(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
  stage(reinterpret_cast<const float*>(slice), dst, n);
}

void stage_f16(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
  stage_halves<f16x8>(reinterpret_cast<const uint16_t*>(slice), dst, n);
}

void stage_bf16(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
  stage_halves<bf16x8>(reinterpret_cast<const uint16_t*>(slice), dst, n);
}

// Q8_0 block (34 bytes): x = d * q, q int8. Elements [j, j + 8) of block b (j a multiple of 8),
// int8 -> int32 -> float and one multiply by the scale, as to_float.
struct Q8_0Rows {
  static constexpr int64_t kBytes = 34;
  static __m256 chunk(const uint8_t* b, int64_t j, __m256 d) {
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + j)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
  }
};

// Q4_0 block (18 bytes): x = d * (q - 8); elements 0..15 are the low nibbles of its 16 bytes,
// 16..31 the high ones, so chunk j reads bytes (j & 15).. shifted right by 4 for the upper half.
struct Q4_0Rows {
  static constexpr int64_t kBytes = 18;
  static __m256 chunk(const uint8_t* b, int64_t j, __m256 d) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + (j & 15)));
    const __m128i nib = _mm_and_si128(_mm_srl_epi16(bytes, _mm_cvtsi32_si128(static_cast<int>(j >> 4) * 4)),
                                      _mm_set1_epi8(0x0f));
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(nib), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
  }
};

// A head slice of a 32-element block type, 8 elements at a time (the scale loaded once per
// block). The slice is whole blocks padded with zeros (attention.h), so the chunks past n read
// its own padding and store the zeros dst's padding wants.
template <class Q>
void stage_blocks(GgmlType, const uint8_t* slice, int64_t n, float* dst) {
  const uint8_t* b = slice;
  int64_t c = 0;
  for (; c < n; c += 32, b += Q::kBytes) {
    const __m256 d = block_scale(b);
    for (int64_t k = 0; k < 32 && c + k < n; k += 8) _mm256_store_ps(dst + c + k, Q::chunk(b, k, d));
  }
  for (c = (n + 7) / 8 * 8; c < round16(n); c += 8) _mm256_store_ps(dst + c, _mm256_setzero_ps());
}

// Any other type: the scalar definition, which reports a type it does not know.
void stage_any(GgmlType t, const uint8_t* slice, int64_t n, float* dst) {
  kv_row_to_float(t, slice, 0, n, dst);
  for (int64_t i = n; i < round16(n); i++) dst[i] = 0.0f;
}

// Slices [lo, nb) of a block (the ones fetched) -> buf, round16(n) floats per slice.
using StageRowsFn = void (*)(GgmlType t, const uint8_t* const* rows, int64_t lo, int64_t nb, int64_t n, float* buf);

template <RowStageFn kStage>
void stage_rows(GgmlType t, const uint8_t* const* rows, int64_t lo, int64_t nb, int64_t n, float* buf) {
  const int64_t np = round16(n);
  for (int64_t j = lo; j < nb; j++) kStage(t, rows[j], n, buf + j * np);
}

// The stager of a tile's K (or V) slices.
StageRowsFn stage_rows_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return stage_rows<stage_f32>;
    case GgmlType::F16: return stage_rows<stage_f16>;
    case GgmlType::BF16: return stage_rows<stage_bf16>;
    case GgmlType::Q8_0: return stage_rows<stage_blocks<Q8_0Rows>>;
    case GgmlType::Q4_0: return stage_rows<stage_blocks<Q4_0Rows>>;
    default: return stage_rows<stage_any>;
  }
}

}  // namespace

void attention_tile_avx2(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                         float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = p.head_dim_v;
  const int64_t dkp = round16(dk), dvp = round16(dv);
  const int64_t n_rows = qs.n_q * group;
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
  const StageRowsFn stage_k = stage_rows_for(p.k_type), stage_v = stage_rows_for(p.v_type);

  int64_t max_kv = 0, min_begin = qs.kv_begin && qs.n_q > 0 ? qs.kv_begin[0] : 0;
  for (int64_t i = 0; i < qs.n_q; i++) {
    max_kv = qs.n_kv[i] > max_kv ? qs.n_kv[i] : max_kv;
    if (qs.kv_begin && qs.kv_begin[i] < min_begin) min_begin = qs.kv_begin[i];
  }
  for (int64_t r = 0; r < n_rows; r++) {
    mx[r] = -__builtin_inff();
    ls[r] = 0.0f;
    for (int64_t c = 0; c < dvp; c += 8) _mm256_store_ps(o + r * dvp + c, _mm256_setzero_ps());
  }

  // Blocks stay aligned to multiples of B from position 0 whatever the tile's queries, so a
  // query sees the same blocks alone and in a tile; positions below min_begin are never fetched.
  for (int64_t j0 = min_begin / B * B; j0 < max_kv; j0 += B) {
    const int64_t nb = min64(B, max_kv - j0);
    const int64_t lo = min_begin > j0 ? min_begin - j0 : 0;
    kv.fetch(kv.ctx, j0 + lo, nb - lo, hk, k_rows + lo, v_rows + lo);
    // This KV head's slice of every fetched row of the block, dequantized to F32 and padded,
    // once for all the tile's query rows.
    stage_k(p.k_type, k_rows, lo, nb, dk, kbuf);
    stage_v(p.v_type, v_rows, lo, nb, dv, vbuf);
    for (int64_t i = 0; i < qs.n_q; i++) {
      const int64_t begin = qs.kv_begin ? qs.kv_begin[i] : 0;
      const int64_t k_lo = begin > j0 ? begin - j0 : 0, nk = min64(nb, qs.n_kv[i] - j0);
      if (nk <= k_lo) continue;
      for (int64_t g = 0; g < group; g++) {
        const int64_t r = i * group + g;
        const float* q = qs.q + qs.rows[i] * qs.ldq + (hk * group + g) * dk;
        row_fn(q, dk, dkp, dvp, p.scale, kbuf, vbuf, k_lo, nk, Row{o + r * dvp, mx + r, ls + r}, pbuf);
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
