// Q6_K x Q8_K matmul, AVX-512 VNNI. Weights are repacked into 16-row groups (kquant_pack.h):
// for each 4 consecutive elements of 16 rows, three 64-byte vectors hold the 6-bit values
// v (0..63, u8) of 4 slices (32 elements apart), three of them one AND away and the fourth a
// few shifts, ready for vpdpbusd against 4 broadcast activation bytes. The format's offset
// (q = v - 32) is applied exactly by starting each group's int32 accumulator at -32 * bsum16
// (ActCorr::Int32), so that after the group
//   acc = sum (v - 32) * a,   isum += scale * acc   (all exact int32),
// and per block y += (d * da) * isum, the reference's float evaluation order.
// Up to kTileTokens tokens (decode) a tile is 16 rows x T (1..4) tokens; every weight vector
// feeds T tokens. More tokens (prefill): 2 row groups x 6 tokens, one scale group at a time
// (for_gemm_tiles in matmul_q8k_avx512.h).
#include "kernels/avx512/matmul_q6k_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx512;

constexpr int kRows = 16;
constexpr size_t kMain = 192 * kRows;  // 4 values in 3 bytes
constexpr size_t kMeta = 18 * kRows;   // int8 scales [g][r], fp16 d[r]
constexpr size_t kBB = kActBlockBytesCorr;

LUMEN_KQ_INLINE __m512i group_scales(const uint8_t* m, int g) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * g)));
}

// Byte vector j (0..2) of elements 128h + 32rr + 4k + i.
LUMEN_KQ_INLINE __m512i value_bytes(const uint8_t* q, int h, int k, int j) {
  return _mm512_loadu_si512(q + 64 * ((h * 8 + k) * 3 + j));
}

// Slices 2P and 2P+1 (elements 128h + 32rr + 16kh .. +15, groups g = 8h + 2rr + kh).
template <int T, int P>
LUMEN_KQ_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int h, int kh,
                                __m512i isum[T]) {
  const __m512i m3f = _mm512_set1_epi8(0x3f);
  const int ga = 8 * h + 4 * P + kh, gb = ga + 2;
  __m512i acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) {
    acc_a[t] = bcast32(a[t] + kActCorr + 4 * ga);
    acc_b[t] = bcast32(a[t] + kActCorr + 4 * gb);
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    __m512i wa, wb;
    if constexpr (P == 0) {
      wa = _mm512_and_si512(value_bytes(q, h, k, 0), m3f);
      wb = _mm512_and_si512(value_bytes(q, h, k, 1), m3f);
    } else {
      // v2 = the top 2 bits of the three bytes; 0xE4 = C ? A : B.
      const __m512i b0 = value_bytes(q, h, k, 0), b1 = value_bytes(q, h, k, 1), b2 = value_bytes(q, h, k, 2);
      const __m512i lo4 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b0, 6), _mm512_srli_epi16(b1, 4),
                                                    _mm512_set1_epi8(0x03), 0xE4);
      wa = _mm512_and_si512(
          _mm512_ternarylogic_epi32(lo4, _mm512_srli_epi16(b2, 2), _mm512_set1_epi8(0x0f), 0xE4), m3f);
      wb = _mm512_and_si512(b2, m3f);
    }
    const int e = 128 * h + 64 * P + 4 * k;
    for (int t = 0; t < T; t++) {
      acc_a[t] = _mm512_dpbusd_epi32(acc_a[t], wa, bcast32(a[t] + e));
      acc_b[t] = _mm512_dpbusd_epi32(acc_b[t], wb, bcast32(a[t] + e + 32));
    }
  }
  const __m512i sa = group_scales(m, ga), sb = group_scales(m, gb);
  for (int t = 0; t < T; t++)
    isum[t] = _mm512_add_epi32(
        isum[t], _mm512_add_epi32(_mm512_mullo_epi32(acc_a[t], sa), _mm512_mullo_epi32(acc_b[t], sb)));
}

template <int T>
void tile(const uint8_t* main, const uint8_t* meta, int64_t nb, const uint8_t* act, size_t stride, float* y,
          int64_t ldy, int n_rows) {
  __m512 acc[T];
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q = main + kMain * static_cast<size_t>(b);
    const uint8_t* m = meta + kMeta * static_cast<size_t>(b);
    prefetch(q + kMain * kPrefetchBlocks, kMain);
    prefetch(m + kMeta * kPrefetchBlocks, kMeta);
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kBB * static_cast<size_t>(b);
    __m512i isum[T];
    for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++)
      for (int kh = 0; kh < 2; kh++) {
        slice_pair<T, 0>(q, m, a, h, kh, isum);
        slice_pair<T, 1>(q, m, a, h, kh, isum);
      }
    const __m512 d = load_f16x16(m + 16 * kRows);
    for (int t = 0; t < T; t++)
      acc[t] = _mm512_add_ps(
          acc[t], mul_rounded(_mm512_mul_ps(d, bcast_f32(a[t] + kActD)), _mm512_cvtepi32_ps(isum[t])));
  }
  const __mmask16 mask = row_mask(n_rows);
  for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + ldy * t, mask, acc[t]);
}

// Weights of scale group 8h + 4P + kh (+2 when kB), elements 4k.. of 16 rows.
template <int P, bool kB>
LUMEN_KQ_INLINE __m512i slice_weights(const uint8_t* q, int h, int k) {
  const __m512i m3f = _mm512_set1_epi8(0x3f);
  if constexpr (P == 0) {
    return _mm512_and_si512(value_bytes(q, h, k, kB ? 1 : 0), m3f);
  } else if constexpr (kB) {
    return _mm512_and_si512(value_bytes(q, h, k, 2), m3f);
  } else {
    const __m512i b0 = value_bytes(q, h, k, 0), b1 = value_bytes(q, h, k, 1), b2 = value_bytes(q, h, k, 2);
    const __m512i lo4 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b0, 6), _mm512_srli_epi16(b1, 4),
                                                  _mm512_set1_epi8(0x03), 0xE4);
    return _mm512_and_si512(_mm512_ternarylogic_epi32(lo4, _mm512_srli_epi16(b2, 2), _mm512_set1_epi8(0x0f), 0xE4),
                            m3f);
  }
}

// One scale group of the GEMM tile: isum[g][t] += scale * (group dot of row group g, token t).
template <int G, int T, int P, bool kB>
LUMEN_KQ_INLINE void gemm_slice(const uint8_t* const q[G], const uint8_t* const m[G], const uint8_t* const a[T],
                                int h, int kh, __m512i isum[G][T]) {
  const int gi = 8 * h + 4 * P + kh + (kB ? 2 : 0);
  __m512i acc[G][T];
  for (int t = 0; t < T; t++) {
    const __m512i c = bcast32(a[t] + kActCorr + 4 * gi);
    for (int g = 0; g < G; g++) acc[g][t] = c;
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    __m512i w[G];
    for (int g = 0; g < G; g++) w[g] = slice_weights<P, kB>(q[g], h, k);
    const int e = 128 * h + 64 * P + 4 * k + (kB ? 32 : 0);
    for (int t = 0; t < T; t++) {
      const __m512i av = bcast32(a[t] + e);
      for (int g = 0; g < G; g++) acc[g][t] = _mm512_dpbusd_epi32(acc[g][t], w[g], av);
    }
  }
  for (int g = 0; g < G; g++) {
    const __m512i sc = group_scales(m[g], gi);
    for (int t = 0; t < T; t++) isum[g][t] = _mm512_add_epi32(isum[g][t], _mm512_mullo_epi32(acc[g][t], sc));
  }
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
      q[g] = main + gbytes * g + kMain * static_cast<size_t>(b);
      m[g] = main + gbytes * g + kMain * static_cast<size_t>(nb) + kMeta * static_cast<size_t>(b);
    }
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kBB * static_cast<size_t>(b);
    __m512i isum[G][T];
    for (int g = 0; g < G; g++)
      for (int t = 0; t < T; t++) isum[g][t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++)
      for (int kh = 0; kh < 2; kh++) {
        gemm_slice<G, T, 0, false>(q, m, a, h, kh, isum);
        gemm_slice<G, T, 0, true>(q, m, a, h, kh, isum);
        gemm_slice<G, T, 1, false>(q, m, a, h, kh, isum);
        gemm_slice<G, T, 1, true>(q, m, a, h, kh, isum);
      }
    for (int g = 0; g < G; g++) {
      const __m512 d = load_f16x16(m[g] + 16 * kRows);
      for (int t = 0; t < T; t++) {
        __m512 f = _mm512_load_ps(facc[g][t]);
        f = _mm512_add_ps(f, mul_rounded(_mm512_mul_ps(d, bcast_f32(a[t] + kActD)), _mm512_cvtepi32_ps(isum[g][t])));
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

void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.n_in / kBlock;
  const size_t gbytes = (static_cast<size_t>(nb) * (kMain + kMeta) + 63) / 64 * 64;
  const uint8_t* base = w.packed.get()->data;
  if (n_tokens > kTileTokens) {
    for_gemm_tiles(r0, r1, n_tokens, gbytes, [&]<int G, int T>(int64_t g, int64_t t) {
      gemm_tile<G, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act + stride * t, stride,
                      y + g * kRows + ldy * t, ldy, g * kRows, r1);
    });
    return;
  }
  for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
    const uint8_t* main = base + gbytes * static_cast<size_t>(g);
    const uint8_t* meta = main + kMain * static_cast<size_t>(nb);
    const int64_t left = r1 - g * kRows;
    const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
    tile<T>(main, meta, nb, act + stride * t, stride, y + g * kRows + ldy * t, ldy, n_rows);
  });
}

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx512(x, dst, n_in, -32); }

}  // namespace

const MatmulKernel kMatmulQ6_KAvx512 = {
    "q6_K/avx512-vnni",         GgmlType::Q6_K, Isa::Avx512, kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_corr, convert,        compute};

}  // namespace lumen
