// Q3_K x Q8_K matmul, AVX2. Weights are repacked into 8-row groups (kquant_pack.h): a 32-byte
// qs load holds the 2-bit low parts of 4 consecutive elements of 4 slices for 8 rows, an hmask
// load their high bits; scales come unpacked to signed int8 per group of 16. The values
// v = low | high << 2 (0..7) are u8 for vpmaddubsw; each group's int16 pair sums start at the
// activation's ActCorr::Pairs16 term (-4 times the activation pair sums), ending at
// sum (v - 4) * a exactly, then one vpmaddwd with the group scale in both halves of each lane
// scales and widens, and per block y += (d * da) * isum, the reference's evaluation order.
// A tile is 8 rows x T (1..2) tokens.
#include "kernels/avx2/matmul_q3k_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx2;

constexpr int kRows = 8;
constexpr size_t kMain = 96 * kRows;  // qs 64R then hmask 32R
constexpr size_t kHm = 64 * kRows;
constexpr size_t kMeta = 18 * kRows;  // int8 scales [g][r], fp16 d[r]
constexpr size_t kBB = kActBlockBytesCorr;

// Bit kBit of each hmask byte moved to bit 2 (other bits are masked off by the caller).
template <int kBit>
LUMEN_KQ2_INLINE __m256i high_bit_to_2(__m256i hm) {
  if constexpr (kBit < 2)
    return _mm256_slli_epi16(hm, 2 - kBit);
  else if constexpr (kBit > 2)
    return _mm256_srli_epi16(hm, kBit - 2);
  else
    return hm;
}

template <int kShift>
LUMEN_KQ2_INLINE __m256i srl16(__m256i v) {
  if constexpr (kShift == 0)
    return v;
  else
    return _mm256_srli_epi16(v, kShift);
}

// Slices J and J+1 (groups g_a = 8H + 2J + kh and g_a + 2).
template <int T, int H, int J>
LUMEN_KQ2_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int kh,
                                 __m256i isum[T]) {
  const __m256i m03 = _mm256_set1_epi8(0x03), m04 = _mm256_set1_epi8(0x04);
  const int ga = 8 * H + 2 * J + kh, gb = ga + 2;
  __m256i acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) {
    acc_a[t] = bcast32(a[t] + kActCorr + 4 * ga);
    acc_b[t] = bcast32(a[t] + kActCorr + 4 * gb);
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * (H * 8 + k)));
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + kHm + 32 * k));
    const __m256i wa = _mm256_or_si256(_mm256_and_si256(srl16<2 * J>(x), m03),
                                       _mm256_and_si256(high_bit_to_2<4 * H + J>(hm), m04));
    const __m256i wb = _mm256_or_si256(_mm256_and_si256(srl16<2 * J + 2>(x), m03),
                                       _mm256_and_si256(high_bit_to_2<4 * H + J + 1>(hm), m04));
    const int e = 128 * H + 32 * J + 4 * k;
    for (int t = 0; t < T; t++) {
      acc_a[t] = _mm256_add_epi16(acc_a[t], _mm256_maddubs_epi16(wa, bcast32(a[t] + e)));
      acc_b[t] = _mm256_add_epi16(acc_b[t], _mm256_maddubs_epi16(wb, bcast32(a[t] + e + 32)));
    }
  }
  const __m256i sa = scales_dup_i8(m + 8 * ga), sb = scales_dup_i8(m + 8 * gb);
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
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kBB * static_cast<size_t>(b);
    __m256i isum[T];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<T, 0, 0>(q, m, a, kh, isum);
      slice_pair<T, 0, 2>(q, m, a, kh, isum);
      slice_pair<T, 1, 0>(q, m, a, kh, isum);
      slice_pair<T, 1, 2>(q, m, a, kh, isum);
    }
    const __m256 d = load_f16x8(m + 16 * kRows);
    for (int t = 0; t < T; t++)
      acc[t] = _mm256_add_ps(
          acc[t], mul_rounded(_mm256_mul_ps(d, bcast_f32(a[t] + kActD)), _mm256_cvtepi32_ps(isum[t])));
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

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx2(x, dst, n_in, -4); }

}  // namespace

const MatmulKernel kMatmulQ3_KAvx2 = {
    "q3_K/avx2", GgmlType::Q3_K, Isa::Avx2, kRows, kquant::pack_kquant_r8, kquant::act_row_bytes_corr,
    convert,     compute};

}  // namespace lumen
