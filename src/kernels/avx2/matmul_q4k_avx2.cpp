// Q4_K and Q5_K x Q8_K matmuls, AVX2. Weights are repacked into 8-row groups (kquant_pack.h):
// one 32-byte load holds 4 consecutive nibble pairs of 8 rows (elements of sub-blocks 2c and
// 2c+1); Q5_K adds a qh load whose bit 2c+p of each byte is bit 4 of the value. Without VNNI,
// vpmaddubsw (u8 values x s8 activations) gives int16 pair sums, accumulated in int16 over a
// whole 32-element sub-block for Q4_K (|sum| <= 16 * 15 * 127 = 30480) or over half of one for
// Q5_K (16 * 31 * 127 would not fit), then one vpmaddwd with the sub-block scale in both halves
// of each row's lane scales and widens to int32, exact.
// Per block the float combination repeats the reference's evaluation order:
//   y += (d * da) * isum;  y -= (dmin * da) * msum,  msum = sum_s min_s * bsum32_s.
// A tile is 8 rows x T (1..2) tokens (16 YMM registers).
#include "kernels/avx2/matmul_q4k_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx2;

constexpr int kRows = 8;
constexpr size_t kMeta = 16 * kRows;

// Main stream bytes per block: nibbles (128R), then for Q5_K the high bits (32R).
template <bool kQ5>
constexpr size_t kMain = (kQ5 ? 160 : 128) * kRows;

// Bit 2c+p of each qh byte moved to bit 4 (other bits are masked off by the caller).
template <int kBit>
LUMEN_KQ2_INLINE __m256i high_bit_to_4(__m256i qh) {
  if constexpr (kBit < 4)
    return _mm256_slli_epi16(qh, 4 - kBit);
  else if constexpr (kBit > 4)
    return _mm256_srli_epi16(qh, kBit - 4);
  else
    return qh;
}

template <bool kQ5, int T, int C>
LUMEN_KQ2_INLINE void chunk(const uint8_t* q, const uint8_t* const a[T], const __m256i sc[8],
                            __m256i isum[T]) {
  const __m256i m0f = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10);
  constexpr int kSpan = kQ5 ? 4 : 8;  // k steps summed in int16 before widening
  for (int k0 = 0; k0 < 8; k0 += kSpan) {
    __m256i lo[T], hi[T];
    for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm256_setzero_si256();
    for (int k = k0; k < k0 + kSpan; k++) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * (8 * C + k)));
      __m256i wl = _mm256_and_si256(x, m0f);
      __m256i wh = _mm256_and_si256(_mm256_srli_epi16(x, 4), m0f);
      if constexpr (kQ5) {
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 128 * kRows + 32 * k));
        wl = _mm256_or_si256(wl, _mm256_and_si256(high_bit_to_4<2 * C>(qh), m10));
        wh = _mm256_or_si256(wh, _mm256_and_si256(high_bit_to_4<2 * C + 1>(qh), m10));
      }
      for (int t = 0; t < T; t++) {
        lo[t] = _mm256_add_epi16(lo[t], _mm256_maddubs_epi16(wl, bcast32(a[t] + 64 * C + 4 * k)));
        hi[t] = _mm256_add_epi16(hi[t], _mm256_maddubs_epi16(wh, bcast32(a[t] + 64 * C + 32 + 4 * k)));
      }
    }
    for (int t = 0; t < T; t++)
      isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(lo[t], sc[2 * C]),
                                                           _mm256_madd_epi16(hi[t], sc[2 * C + 1])));
  }
}

template <bool kQ5, int T>
void tile(const uint8_t* main, const uint8_t* meta, int64_t nb, const uint8_t* act, size_t stride, float* y,
          int64_t ldy, int n_rows) {
  __m256 acc[T];
  for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q = main + kMain<kQ5> * static_cast<size_t>(b);
    const uint8_t* m = meta + kMeta * static_cast<size_t>(b);
    prefetch(q + kMain<kQ5> * kPrefetchBlocks, kMain<kQ5>);
    prefetch(m + kMeta * kPrefetchBlocks, kMeta);
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
    __m256i sc[8], mp[4];
    unpack_k4_scales(m, sc, mp);
    __m256i isum[T];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    chunk<kQ5, T, 0>(q, a, sc, isum);
    chunk<kQ5, T, 1>(q, a, sc, isum);
    chunk<kQ5, T, 2>(q, a, sc, isum);
    chunk<kQ5, T, 3>(q, a, sc, isum);
    const __m256 d = load_f16x8(m + 12 * kRows);
    const __m256 dmin = load_f16x8(m + 14 * kRows);
    for (int t = 0; t < T; t++) {
      __m256i msum = _mm256_setzero_si256();
      for (int p = 0; p < 4; p++)
        msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp[p], bcast32(a[t] + kActBsums32 + 4 * p)));
      const __m256 da = bcast_f32(a[t] + kActD);
      acc[t] = _mm256_add_ps(acc[t], mul_rounded(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[t])));
      acc[t] = _mm256_sub_ps(acc[t], mul_rounded(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(msum)));
    }
  }
  for (int t = 0; t < T; t++) store_rows(y + ldy * t, acc[t], n_rows);
}

template <bool kQ5>
void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.n_in / kBlock;
  const size_t gbytes = (static_cast<size_t>(nb) * (kMain<kQ5> + kMeta) + 63) / 64 * 64;
  const uint8_t* base = w.packed.get()->data;
  for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
    const uint8_t* main = base + gbytes * static_cast<size_t>(g);
    const uint8_t* meta = main + kMain<kQ5> * static_cast<size_t>(nb);
    const int64_t left = r1 - g * kRows;
    const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
    tile<kQ5, T>(main, meta, nb, act + stride * t, stride, y + g * kRows + ldy * t, ldy, n_rows);
  });
}

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx2(x, dst, n_in, 0); }

}  // namespace

const MatmulKernel kMatmulQ4_KAvx2 = {"q4_K/avx2", GgmlType::Q4_K,         Isa::Avx2,
                                      kRows,       kquant::pack_kquant_r8, kquant::act_row_bytes_plain,
                                      convert,     compute<false>};
const MatmulKernel kMatmulQ5_KAvx2 = {"q5_K/avx2", GgmlType::Q5_K,         Isa::Avx2,
                                      kRows,       kquant::pack_kquant_r8, kquant::act_row_bytes_plain,
                                      convert,     compute<true>};

}  // namespace lumen
