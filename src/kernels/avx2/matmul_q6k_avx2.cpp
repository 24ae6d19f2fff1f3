// Q6_K x Q8_K matmul, AVX2. Weights are repacked into 8-row groups (kquant_pack.h): for each 4
// consecutive elements of 8 rows, three 32-byte vectors hold the 6-bit values v (0..63, u8) of
// 4 slices (32 elements apart), three of them one AND away and the fourth a few shifts, for
// vpmaddubsw against 4 broadcast activation bytes. Each 16-element group accumulates its int16
// pair sums starting from the activation's ActCorr::Pairs16 term (-32 times the same pair sums
// of the activations), so the lanes end at sum (v - 32) * a, |.| <= 4 * 2 * 32 * 127 = 32512:
// exact in int16 (the wrapping adds may overflow on the way but not at the end). One vpmaddwd
// with the group scale in both halves of each lane then scales and widens, and per block
// y += (d * da) * isum, the reference's order. A tile is 8 rows x T (1..2) tokens.
#include "kernels/avx2/matmul_q6k_avx2.h"

#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx2;

constexpr int kRows = 8;
constexpr size_t kMain = 192 * kRows;  // 4 values in 3 bytes
constexpr size_t kMeta = 18 * kRows;   // int8 scales [g][r], fp16 d[r]
constexpr size_t kBB = kActBlockBytesCorr;

// Byte vector j (0..2) of elements 128h + 32rr + 4k + i.
LUMEN_KQ2_INLINE __m256i value_bytes(const uint8_t* q, int h, int k, int j) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * ((h * 8 + k) * 3 + j)));
}

// Slices 2P and 2P+1 (elements 128h + 32rr + 16kh .. +15, groups g = 8h + 2rr + kh).
template <int T, int P>
LUMEN_KQ2_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int h, int kh,
                                 __m256i isum[T]) {
  const __m256i m3f = _mm256_set1_epi8(0x3f);
  const int ga = 8 * h + 4 * P + kh, gb = ga + 2;
  __m256i acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) {
    acc_a[t] = bcast32(a[t] + kActCorr + 4 * ga);
    acc_b[t] = bcast32(a[t] + kActCorr + 4 * gb);
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    __m256i wa, wb;
    if constexpr (P == 0) {
      wa = _mm256_and_si256(value_bytes(q, h, k, 0), m3f);
      wb = _mm256_and_si256(value_bytes(q, h, k, 1), m3f);
    } else {
      // v2 = the top 2 bits of the three bytes.
      const __m256i b0 = value_bytes(q, h, k, 0), b1 = value_bytes(q, h, k, 1), b2 = value_bytes(q, h, k, 2);
      const __m256i lo4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b0, 6), _mm256_set1_epi8(0x03)),
                                          _mm256_and_si256(_mm256_srli_epi16(b1, 4), _mm256_set1_epi8(0x0c)));
      wa = _mm256_or_si256(lo4, _mm256_and_si256(_mm256_srli_epi16(b2, 2), _mm256_set1_epi8(0x30)));
      wb = _mm256_and_si256(b2, m3f);
    }
    const int e = 128 * h + 64 * P + 4 * k;
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
    for (int h = 0; h < 2; h++)
      for (int kh = 0; kh < 2; kh++) {
        slice_pair<T, 0>(q, m, a, h, kh, isum);
        slice_pair<T, 1>(q, m, a, h, kh, isum);
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

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx2(x, dst, n_in, -32); }

}  // namespace

const MatmulKernel kMatmulQ6_KAvx2 = {
    "q6_K/avx2", GgmlType::Q6_K, Isa::Avx2, kRows, kquant::pack_kquant_r8, kquant::act_row_bytes_corr,
    convert,     compute};

}  // namespace lumen
