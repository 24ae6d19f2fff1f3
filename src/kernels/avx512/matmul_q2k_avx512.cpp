// Q2_K x Q8_K matmul, AVX-512 VNNI. Weights are repacked into 16-row groups (kquant_pack.h): a
// 64-byte qs load holds the 2-bit values (u8 0..3 after a shift and mask) of 4 consecutive
// elements of 4 slices (32 elements each) for 16 rows; the scale bytes (4-bit scale | 4-bit
// min << 4) are stored per group of 16 as [g][r]. Per group the vpdpbusd sums are multiplied by
// the scale (exact int32), the minimums meet the activations' bsums16 through vpdpwssd, and
// per block y += (d * da) * isum; y -= (dmin * da) * msum, the reference's evaluation order.
// A tile is 16 rows x T (1..4) tokens; every weight vector feeds T tokens.
#include "kernels/avx512/matmul_q2k_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx512;

constexpr int kRows = 16;
constexpr size_t kMain = 64 * kRows;  // qs
constexpr size_t kMeta = 20 * kRows;  // scale bytes [g][r], fp16 d[r], fp16 dmin[r]

template <int kShift>
LUMEN_KQ_INLINE __m512i srl16(__m512i v) {
  if constexpr (kShift == 0)
    return v;
  else
    return _mm512_srli_epi16(v, kShift);
}

// Slices J and J+1 (elements 128H + 32J + 16kh .. +15 and the same 32 further: groups
// g_a = 8H + 2J + kh and g_a + 2).
template <int T, int H, int J>
LUMEN_KQ_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int kh,
                                __m512i isum[T]) {
  const __m512i m03 = _mm512_set1_epi8(0x03);
  const int ga = 8 * H + 2 * J + kh, gb = ga + 2;
  __m512i acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) acc_a[t] = acc_b[t] = _mm512_setzero_si512();
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    const __m512i x = _mm512_loadu_si512(q + 64 * (H * 8 + k));
    const __m512i wa = _mm512_and_si512(srl16<2 * J>(x), m03);
    const __m512i wb = _mm512_and_si512(srl16<2 * J + 2>(x), m03);
    const int e = 128 * H + 32 * J + 4 * k;
    for (int t = 0; t < T; t++) {
      acc_a[t] = _mm512_dpbusd_epi32(acc_a[t], wa, bcast32(a[t] + e));
      acc_b[t] = _mm512_dpbusd_epi32(acc_b[t], wb, bcast32(a[t] + e + 32));
    }
  }
  const __m512i m0f = _mm512_set1_epi32(0x0f);
  const __m512i sa = _mm512_and_si512(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * ga))), m0f);
  const __m512i sb = _mm512_and_si512(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * gb))), m0f);
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
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
    __m512i isum[T], msum[T];
    for (int t = 0; t < T; t++) isum[t] = msum[t] = _mm512_setzero_si512();
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<T, 0, 0>(q, m, a, kh, isum);
      slice_pair<T, 0, 2>(q, m, a, kh, isum);
      slice_pair<T, 1, 0>(q, m, a, kh, isum);
      slice_pair<T, 1, 2>(q, m, a, kh, isum);
    }
    // Minimums of groups 2p and 2p+1 as the two 16-bit halves of each row's lane.
    const __m256i m0f = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 8; p++) {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 32 * p));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 32 * p + 16));
      const __m256i inter = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
      const __m512i mins = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(inter, 4), m0f));
      for (int t = 0; t < T; t++)
        msum[t] = _mm512_dpwssd_epi32(msum[t], mins, bcast32(a[t] + kActBsums16 + 4 * p));
    }
    const __m512 d = load_f16x16(m + 16 * kRows);
    const __m512 dmin = load_f16x16(m + 18 * kRows);
    for (int t = 0; t < T; t++) {
      const __m512 da = bcast_f32(a[t] + kActD);
      acc[t] = _mm512_add_ps(acc[t], mul_rounded(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum[t])));
      acc[t] = _mm512_sub_ps(acc[t], mul_rounded(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum[t])));
    }
  }
  const __mmask16 mask = row_mask(n_rows);
  for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + ldy * t, mask, acc[t]);
}

void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.n_in / kBlock;
  const size_t gbytes = (static_cast<size_t>(nb) * (kMain + kMeta) + 63) / 64 * 64;
  const uint8_t* base = w.packed.get()->data;
  for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
    const uint8_t* main = base + gbytes * static_cast<size_t>(g);
    const uint8_t* meta = main + kMain * static_cast<size_t>(nb);
    const int64_t left = r1 - g * kRows;
    const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
    tile<T>(main, meta, nb, act + stride * t, stride, y + g * kRows + ldy * t, ldy, n_rows);
  });
}

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx512(x, dst, n_in, 0); }

}  // namespace

const MatmulKernel kMatmulQ2_KAvx512 = {
    "q2_K/avx512-vnni",          GgmlType::Q2_K, Isa::Avx512, kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_plain, convert,        compute};

}  // namespace lumen
