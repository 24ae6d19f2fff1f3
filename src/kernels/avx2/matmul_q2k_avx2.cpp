// Q2_K x Q8_K matmul, AVX2. Weights are repacked into 8-row groups (kquant_pack.h): a 32-byte
// qs load holds the 2-bit values (u8 0..3 after a shift and mask) of 4 consecutive elements of
// 4 slices for 8 rows; the scale bytes (4-bit scale | 4-bit min << 4) are stored per group of
// 16 as [g][r]. Each group's vpmaddubsw pair sums accumulate in int16 (tiny), one vpmaddwd
// with the group scale in both halves of each lane scales and widens them, the minimums meet
// the activations' bsums16 through vpmaddwd, and per block y += (d * da) * isum;
// y -= (dmin * da) * msum, the reference's evaluation order. A tile is 8 rows x T (1..2) tokens.
#include "kernels/avx2/matmul_q2k_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx2;

constexpr int kRows = 8;
constexpr size_t kMain = 64 * kRows;  // qs
constexpr size_t kMeta = 20 * kRows;  // scale bytes [g][r], fp16 d[r], fp16 dmin[r]

template <int kShift>
LUMEN_KQ2_INLINE __m256i srl16(__m256i v) {
  if constexpr (kShift == 0)
    return v;
  else
    return _mm256_srli_epi16(v, kShift);
}

// The 4-bit scales of group g (8 rows) in both 16-bit halves of each row's lane.
LUMEN_KQ2_INLINE __m256i scales_dup_u4(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  const __m128i b = _mm_and_si128(_mm_cvtsi64_si128(v), _mm_set1_epi8(0x0f));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(b, b));
}

// Slices J and J+1 (groups g_a = 8H + 2J + kh and g_a + 2).
template <int T, int H, int J>
LUMEN_KQ2_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int kh,
                                 __m256i isum[T]) {
  const __m256i m03 = _mm256_set1_epi8(0x03);
  const int ga = 8 * H + 2 * J + kh, gb = ga + 2;
  __m256i acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) acc_a[t] = acc_b[t] = _mm256_setzero_si256();
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * (H * 8 + k)));
    const __m256i wa = _mm256_and_si256(srl16<2 * J>(x), m03);
    const __m256i wb = _mm256_and_si256(srl16<2 * J + 2>(x), m03);
    const int e = 128 * H + 32 * J + 4 * k;
    for (int t = 0; t < T; t++) {
      acc_a[t] = _mm256_add_epi16(acc_a[t], _mm256_maddubs_epi16(wa, bcast32(a[t] + e)));
      acc_b[t] = _mm256_add_epi16(acc_b[t], _mm256_maddubs_epi16(wb, bcast32(a[t] + e + 32)));
    }
  }
  const __m256i sa = scales_dup_u4(m + 8 * ga), sb = scales_dup_u4(m + 8 * gb);
  for (int t = 0; t < T; t++)
    isum[t] = _mm256_add_epi32(
        isum[t], _mm256_add_epi32(_mm256_madd_epi16(acc_a[t], sa), _mm256_madd_epi16(acc_b[t], sb)));
}

template <int T>
void tile(const uint8_t* main, const uint8_t* meta, int64_t nb, const uint8_t* act, size_t stride, float* y,
          int64_t ldy, int n_rows) {
  __m256 acc[T];
  for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q = main + kMain * static_cast<size_t>(b);
    const uint8_t* m = meta + kMeta * static_cast<size_t>(b);
    prefetch(q + kMain * kPrefetchBlocks, kMain);
    prefetch(m + kMeta * kPrefetchBlocks, kMeta);
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
    __m256i isum[T], msum[T];
    for (int t = 0; t < T; t++) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<T, 0, 0>(q, m, a, kh, isum);
      slice_pair<T, 0, 2>(q, m, a, kh, isum);
      slice_pair<T, 1, 0>(q, m, a, kh, isum);
      slice_pair<T, 1, 2>(q, m, a, kh, isum);
    }
    // Minimums of groups 2p and 2p+1 as the two 16-bit halves of each row's lane.
    const __m128i m0f = _mm_set1_epi8(0x0f);
    for (int p = 0; p < 8; p++) {
      int64_t lo, hi;
      std::memcpy(&lo, m + 16 * p, 8);
      std::memcpy(&hi, m + 16 * p + 8, 8);
      const __m128i inter = _mm_unpacklo_epi8(_mm_cvtsi64_si128(lo), _mm_cvtsi64_si128(hi));
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(inter, 4), m0f));
      for (int t = 0; t < T; t++)
        msum[t] = _mm256_add_epi32(msum[t], _mm256_madd_epi16(mins, bcast32(a[t] + kActBsums16 + 4 * p)));
    }
    const __m256 d = load_f16x8(m + 16 * kRows);
    const __m256 dmin = load_f16x8(m + 18 * kRows);
    for (int t = 0; t < T; t++) {
      const __m256 da = bcast_f32(a[t] + kActD);
      acc[t] = _mm256_add_ps(acc[t], mul_rounded(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[t])));
      acc[t] = _mm256_sub_ps(acc[t], mul_rounded(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(msum[t])));
    }
  }
  for (int t = 0; t < T; t++) store_rows(y + ldy * t, acc[t], n_rows);
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

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx2(x, dst, n_in, 0); }

}  // namespace

const MatmulKernel kMatmulQ2_KAvx2 = {
    "q2_K/avx2", GgmlType::Q2_K, Isa::Avx2, kRows, kquant::pack_kquant_r8, kquant::act_row_bytes_plain,
    convert,     compute};

}  // namespace lumen
