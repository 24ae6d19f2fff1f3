// Q4_K x Q8_K matmul, AVX2. Weights are repacked into 8-row groups (kquant_pack.h): one 32-byte
// load holds 4 consecutive nibble pairs of 8 rows (elements of sub-blocks 2c and 2c+1). Without
// VNNI, vpmaddubsw (u8 nibbles x s8 activations) gives int16 pair sums; a whole 32-element
// sub-block accumulates in int16 (|sum| <= 16 * 2 * 15 * 127 = 30480), then one vpmaddwd with
// the sub-block scale in both halves of each row's lane scales and widens it to int32, exact.
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
constexpr size_t kMain = 128 * kRows;
constexpr size_t kMeta = 16 * kRows;

template <int T>
void tile(const uint8_t* main, const uint8_t* meta, int64_t nb, const uint8_t* act, size_t stride,
          float* y, int64_t ldy, int n_rows) {
  __m256 acc[T];
  for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
  const __m256i m0f = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q = main + kMain * static_cast<size_t>(b);
    const uint8_t* m = meta + kMeta * static_cast<size_t>(b);
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
    __m256i sc[8], mp[4];
    unpack_k4_scales(m, sc, mp);
    __m256i isum[T];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      __m256i lo[T], hi[T];
      for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm256_setzero_si256();
      for (int k = 0; k < 8; k++) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * (8 * c + k)));
        const __m256i wl = _mm256_and_si256(x, m0f);
        const __m256i wh = _mm256_and_si256(_mm256_srli_epi16(x, 4), m0f);
        for (int t = 0; t < T; t++) {
          lo[t] = _mm256_add_epi16(lo[t], _mm256_maddubs_epi16(wl, bcast32(a[t] + 64 * c + 4 * k)));
          hi[t] = _mm256_add_epi16(hi[t], _mm256_maddubs_epi16(wh, bcast32(a[t] + 64 * c + 32 + 4 * k)));
        }
      }
      for (int t = 0; t < T; t++)
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(lo[t], sc[2 * c]),
                                                             _mm256_madd_epi16(hi[t], sc[2 * c + 1])));
    }
    const __m256 d = load_f16x8(m + 12 * kRows);
    const __m256 dmin = load_f16x8(m + 14 * kRows);
    for (int t = 0; t < T; t++) {
      __m256i msum = _mm256_setzero_si256();
      for (int p = 0; p < 4; p++)
        msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp[p], bcast32(a[t] + kActBsums32 + 4 * p)));
      const __m256 da = bcast_f32(a[t] + kActD);
      acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[t])));
      acc[t] = _mm256_sub_ps(acc[t], _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(msum)));
    }
  }
  for (int t = 0; t < T; t++) store_rows(y + ldy * t, acc[t], n_rows);
}

void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.n_in / kBlock;
  const size_t gbytes = (static_cast<size_t>(nb) * (kMain + kMeta) + 63) / 64 * 64;
  const uint8_t* base = w.packed.get()->data;
  for (int64_t g = r0 / kRows; g * kRows < r1; g++) {
    const uint8_t* main = base + gbytes * static_cast<size_t>(g);
    const uint8_t* meta = main + kMain * static_cast<size_t>(nb);
    const int64_t left = r1 - g * kRows;
    const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
    float* yg = y + g * kRows;
    int64_t t = 0;
    for (; t + 2 <= n_tokens; t += 2) tile<2>(main, meta, nb, act + stride * t, stride, yg + ldy * t, ldy, n_rows);
    if (t < n_tokens) tile<1>(main, meta, nb, act + stride * t, stride, yg + ldy * t, ldy, n_rows);
  }
}

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx2(x, dst, n_in, 0); }

}  // namespace

const MatmulKernel kMatmulQ4_KAvx2 = {"q4_K/avx2", GgmlType::Q4_K, Isa::Avx2, kRows, kquant::pack_kquant_r8,
                                      kquant::act_row_bytes_plain, convert, compute};

}  // namespace lumen
