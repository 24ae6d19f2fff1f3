// Q4_K and Q5_K x Q8_K matmuls, AVX-512 VNNI. Weights are repacked into 16-row groups
// (kquant_pack.h): one 64-byte load holds 4 consecutive nibble pairs of 16 rows, i.e. 4 elements
// of sub-block 2c (low nibbles) and of sub-block 2c+1 (high nibbles); Q5_K adds a qh load whose
// bit 2c+p of each byte is bit 4 of the value. The values are u8 and the activations s8, so
// vpdpbusd against 4 activation bytes broadcast to all lanes accumulates 16 row partial sums
// with no offset trick. Per sub-block the int32 sums are multiplied by the 6-bit scales
// (exact), per block the float combination repeats the reference's evaluation order:
//   y += (d * da) * isum;  y -= (dmin * da) * msum,  msum = sum_s min_s * bsum32_s (vpdpwssd).
// Up to kTileTokens tokens (decode) a tile is 16 rows x T (1..4) tokens; every weight vector
// feeds T tokens. More tokens (prefill, Q4_K): 2 row groups x 6 tokens, one sub-block at a time
// (for_gemm_tiles in matmul_q8k_avx512.h), the 12 sub-block sums in registers and the scales
// read from memory by vpmulld.
#include "kernels/avx512/matmul_q4k_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx512;

constexpr int kRows = 16;
constexpr size_t kMeta = 16 * kRows;

// Main stream bytes per block: nibbles (128R), then for Q5_K the high bits (32R).
template <bool kQ5>
constexpr size_t kMain = (kQ5 ? 160 : 128) * kRows;

// Bit 2c+p of each qh byte moved to bit 4 (other bits are masked off by the caller).
template <int kBit>
LUMEN_KQ_INLINE __m512i high_bit_to_4(__m512i qh) {
  if constexpr (kBit < 4)
    return _mm512_slli_epi16(qh, 4 - kBit);
  else if constexpr (kBit > 4)
    return _mm512_srli_epi16(qh, kBit - 4);
  else
    return qh;
}

template <bool kQ5, int C>
LUMEN_KQ_INLINE void chunk_weights(const uint8_t* q, int k, __m512i& wl, __m512i& wh) {
  const __m512i m0f = _mm512_set1_epi8(0x0f);
  const __m512i x = _mm512_loadu_si512(q + 64 * (8 * C + k));
  if constexpr (!kQ5) {
    wl = _mm512_and_si512(x, m0f);
    wh = _mm512_and_si512(_mm512_srli_epi16(x, 4), m0f);
  } else {
    const __m512i m10 = _mm512_set1_epi8(0x10);
    const __m512i qh = _mm512_loadu_si512(q + 128 * kRows + 64 * k);
    // A | (B & C): the nibble, plus the high bit masked to bit 4.
    wl = _mm512_ternarylogic_epi32(_mm512_and_si512(x, m0f), high_bit_to_4<2 * C>(qh), m10, 0xF8);
    wh = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(x, 4), m0f),
                                   high_bit_to_4<2 * C + 1>(qh), m10, 0xF8);
  }
}

template <bool kQ5, int T, int C>
LUMEN_KQ_INLINE void chunk(const uint8_t* q, const uint8_t* const a[T], const __m512i sc[8],
                           __m512i isum[T]) {
  __m512i lo[T], hi[T];
  for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm512_setzero_si512();
  for (int k = 0; k < 8; k++) {
    __m512i wl, wh;
    chunk_weights<kQ5, C>(q, k, wl, wh);
    for (int t = 0; t < T; t++) {
      lo[t] = _mm512_dpbusd_epi32(lo[t], wl, bcast32(a[t] + 64 * C + 4 * k));
      hi[t] = _mm512_dpbusd_epi32(hi[t], wh, bcast32(a[t] + 64 * C + 32 + 4 * k));
    }
  }
  for (int t = 0; t < T; t++)
    isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(lo[t], sc[2 * C]),
                                                         _mm512_mullo_epi32(hi[t], sc[2 * C + 1])));
}

template <bool kQ5, int T>
void tile(const uint8_t* main, const uint8_t* meta, int64_t nb, const uint8_t* act, size_t stride, float* y,
          int64_t ldy, int n_rows) {
  __m512 acc[T];
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q = main + kMain<kQ5> * static_cast<size_t>(b);
    const uint8_t* m = meta + kMeta * static_cast<size_t>(b);
    prefetch(q + kMain<kQ5> * kPrefetchBlocks, kMain<kQ5>);
    prefetch(m + kMeta * kPrefetchBlocks, kMeta);
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
    __m512i sc[8], mp[4];
    unpack_k4_scales(m, sc, mp);
    __m512i isum[T];
    for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
    chunk<kQ5, T, 0>(q, a, sc, isum);
    chunk<kQ5, T, 1>(q, a, sc, isum);
    chunk<kQ5, T, 2>(q, a, sc, isum);
    chunk<kQ5, T, 3>(q, a, sc, isum);
    const __m512 d = load_f16x16(m + 12 * kRows);
    const __m512 dmin = load_f16x16(m + 14 * kRows);
    for (int t = 0; t < T; t++) {
      __m512i msum = _mm512_setzero_si512();
      for (int p = 0; p < 4; p++)
        msum = _mm512_dpwssd_epi32(msum, mp[p], bcast32(a[t] + kActBsums32 + 4 * p));
      const __m512 da = bcast_f32(a[t] + kActD);
      acc[t] = _mm512_add_ps(acc[t], mul_rounded(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum[t])));
      acc[t] = _mm512_sub_ps(acc[t], mul_rounded(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum)));
    }
  }
  const __mmask16 mask = row_mask(n_rows);
  for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + ldy * t, mask, acc[t]);
}

// Q4_K weights of sub-block s = 2c + H (H: high nibbles), 4 elements k of 16 rows.
template <int H>
LUMEN_KQ_INLINE __m512i sub_weights(const uint8_t* q, int c, int k) {
  const __m512i m0f = _mm512_set1_epi8(0x0f);
  const __m512i x = _mm512_loadu_si512(q + 64 * (8 * c + k));
  return H ? _mm512_and_si512(_mm512_srli_epi16(x, 4), m0f) : _mm512_and_si512(x, m0f);
}

// One sub-block of the GEMM tile: isum[g][t] += scale * (sub-block dot of group g, token t).
template <int G, int T, int H>
LUMEN_KQ_INLINE void gemm_sub(const uint8_t* const q[G], const uint8_t* const a[T], const __m512i (*sc)[8], int c,
                              __m512i isum[G][T]) {
  __m512i acc[G][T];
  for (int g = 0; g < G; g++)
    for (int t = 0; t < T; t++) acc[g][t] = zero_idiom();
  for (int k = 0; k < 8; k++) {
    __m512i w[G];
    for (int g = 0; g < G; g++) w[g] = sub_weights<H>(q[g], c, k);
    for (int t = 0; t < T; t++) {
      const __m512i av = bcast32(a[t] + 64 * c + 32 * H + 4 * k);
      for (int g = 0; g < G; g++) acc[g][t] = _mm512_dpbusd_epi32(acc[g][t], w[g], av);
    }
  }
  for (int g = 0; g < G; g++)
    for (int t = 0; t < T; t++)
      isum[g][t] = _mm512_add_epi32(isum[g][t], _mm512_mullo_epi32(acc[g][t], sc[g][2 * c + H]));
  pin<G, T>(isum);
}

// The many-token tile: G row groups (at main + g * gbytes) x T tokens.
template <int G, int T>
void gemm_tile(const uint8_t* main, size_t gbytes, int64_t nb, const uint8_t* act, size_t stride, float* y,
               int64_t ldy, int64_t row0, int64_t r1) {
  alignas(64) float facc[G][T][16] = {};
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q[G];
    const uint8_t* m[G];
    for (int g = 0; g < G; g++) {
      q[g] = main + gbytes * g + kMain<false> * static_cast<size_t>(b);
      m[g] = main + gbytes * g + kMain<false> * static_cast<size_t>(nb) + kMeta * static_cast<size_t>(b);
    }
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
    __m512i sc[G][8], mp[G][4];
    for (int g = 0; g < G; g++) unpack_k4_scales(m[g], sc[g], mp[g]);
    // The minimum terms (dmin * da) * msum need no dot products: computed first, off the
    // critical path at the block's end, and kept in memory.
    alignas(64) float mterm[G][T][16];
    for (int g = 0; g < G; g++) {
      const __m512 dmin = load_f16x16(m[g] + 14 * kRows);
      for (int t = 0; t < T; t++) {
        __m512i msum = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++)
          msum = _mm512_dpwssd_epi32(msum, mp[g][p], bcast32(a[t] + kActBsums32 + 4 * p));
        _mm512_store_ps(mterm[g][t],
                        mul_rounded(_mm512_mul_ps(dmin, bcast_f32(a[t] + kActD)), _mm512_cvtepi32_ps(msum)));
      }
    }
    __m512i isum[G][T];
    for (int g = 0; g < G; g++)
      for (int t = 0; t < T; t++) isum[g][t] = _mm512_setzero_si512();
    // A rolled loop over the 4 chunks: the unrolled block (~15 KiB of code) measured slower.
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) {
      gemm_sub<G, T, 0>(q, a, sc, c, isum);
      gemm_sub<G, T, 1>(q, a, sc, c, isum);
    }
    for (int g = 0; g < G; g++) {
      const __m512 d = load_f16x16(m[g] + 12 * kRows);
      for (int t = 0; t < T; t++) {
        const __m512 da = bcast_f32(a[t] + kActD);
        __m512 f = _mm512_load_ps(facc[g][t]);
        f = _mm512_add_ps(f, mul_rounded(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum[g][t])));
        f = _mm512_sub_ps(f, _mm512_load_ps(mterm[g][t]));
        _mm512_store_ps(facc[g][t], f);
      }
    }
  }
  for (int g = 0; g < G; g++) {
    const int64_t left = r1 - row0 - kRows * g;
    if (left <= 0) break;
    const __mmask16 mask = row_mask(left < kRows ? static_cast<int>(left) : kRows);
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + ldy * t + kRows * g, mask, _mm512_load_ps(facc[g][t]));
  }
}

template <bool kQ5>
void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.n_in / kBlock;
  const size_t gbytes = (static_cast<size_t>(nb) * (kMain<kQ5> + kMeta) + 63) / 64 * 64;
  const uint8_t* base = w.packed.get()->data;
  // Q5_K keeps the 1 x 4 tiles for now: a sub-block-at-a-time tile (with the high-bit loads and
  // shifts repeated per sub-block) measured no faster.
  if constexpr (!kQ5) {
    if (n_tokens > kTileTokens) {
      for_gemm_tiles(r0, r1, n_tokens, gbytes, [&]<int G, int T>(int64_t g, int64_t t) {
        gemm_tile<G, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act + stride * t, stride,
                             y + g * kRows + ldy * t, ldy, g * kRows, r1);
      });
      return;
    }
  }
  for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
    const uint8_t* main = base + gbytes * static_cast<size_t>(g);
    const uint8_t* meta = main + kMain<kQ5> * static_cast<size_t>(nb);
    const int64_t left = r1 - g * kRows;
    const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
    tile<kQ5, T>(main, meta, nb, act + stride * t, stride, y + g * kRows + ldy * t, ldy, n_rows);
  });
}

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx512(x, dst, n_in, 0); }

}  // namespace

const MatmulKernel kMatmulQ4_KAvx512 = {
    "q4_K/avx512-vnni",          GgmlType::Q4_K, Isa::Avx512,   kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_plain, convert,        compute<false>};
const MatmulKernel kMatmulQ5_KAvx512 = {
    "q5_K/avx512-vnni",          GgmlType::Q5_K, Isa::Avx512,  kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_plain, convert,        compute<true>};

}  // namespace lumen
