// The K-quant families over kernels/generic/kq_slices.h on AVX-512 VNNI: Q2_K, Q3_K and Q6_K x
// Q8_K. Up to Kq::kTileTokens tokens (decode), kquant::SlicesKernel over avx512::Kq: 16-row groups,
// vpdpbusd int32 sums times the group scale (Q2_K's minimums through vpdpwssd; Q3_K and Q6_K start
// the sums at ActCorr::Int32, the activation correction that undoes their offset; Q3_K's high bit
// joins the low two in one vpternlogd), a tile of 16 rows x T (1..4) tokens, every weight vector
// feeding T tokens.
// Q6_K's weights are repacked into 16-row groups (kquant_pack.h): for each 4 consecutive elements
// of 16 rows, three 64-byte vectors hold the 6-bit values v (0..63, u8) of 4 slices (32 elements
// apart), three of them one AND away and the fourth a few shifts, ready for vpdpbusd against 4
// broadcast activation bytes. The format's offset (q = v - 32) is applied exactly by starting
// each group's int32 accumulator at -32 * bsum16 (ActCorr::Int32), so that after the group
//   acc = sum (v - 32) * a,   isum += scale * acc   (all exact int32),
// and per block y += (d * da) * isum, the reference's float evaluation order.
// More tokens (Q6_K prefill), here alone because only AVX-512's 32 registers hold it: 2 row
// groups x 6 tokens, one scale group at a time (for_gemm_tiles in matmul_q8k_avx512.h).
#include "kernels/avx512/matmul_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/generic/kq_slices.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx512;

constexpr int kRows = 16;
constexpr size_t kMainQ6 = 192 * kRows;  // 4 values in 3 bytes
constexpr size_t kMetaQ6 = 18 * kRows;   // int8 scales [g][r], fp16 d[r]
constexpr size_t kBB = kActBlockBytesCorr;

using Q6KGemv = SlicesKernel<Kq, Q6K>;  // kernels/generic/kq_slices.h

LUMEN_KQ_INLINE __m512i group_scales(const uint8_t* m, int g) { return Kq::group_scales_i8(m + 16 * g); }

// Weights of scale group 8h + 4P + kh (+2 when kB), elements 4k.. of 16 rows.
template <int P, bool kB>
LUMEN_KQ_INLINE __m512i slice_weights(const uint8_t* q, int h, int k) {
  return Q6K::weight<Kq, P, kB>(q, h, k);
}

// One scale group of the GEMM tile: isum[g][t] += scale * (group dot of row group g, token t).
template <int G, int T, int P, bool kB>
LUMEN_KQ_INLINE void gemm_slice(const uint8_t* const q[G], const uint8_t* const m[G], const uint8_t* const a[T],
                                int h, int kh, __m512i isum[G][T]) {
  const int gi = 8 * h + 4 * P + kh + (kB ? 2 : 0);
  __m512i acc[G][T];
  for (int t = 0; t < T; t++) {
    const __m512i c = Kq::bcast32(a[t] + kActCorr + 4 * gi);
    for (int g = 0; g < G; g++) acc[g][t] = c;
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    __m512i w[G];
    for (int g = 0; g < G; g++) w[g] = slice_weights<P, kB>(q[g], h, k);
    const int e = 128 * h + 64 * P + 4 * k + (kB ? 32 : 0);
    for (int t = 0; t < T; t++) {
      const __m512i av = Kq::bcast32(a[t] + e);
      for (int g = 0; g < G; g++) acc[g][t] = _mm512_dpbusd_epi32(acc[g][t], w[g], av);
    }
  }
  for (int g = 0; g < G; g++) {
    const __m512i sc = group_scales(m[g], gi);
    for (int t = 0; t < T; t++) isum[g][t] = _mm512_add_epi32(isum[g][t], _mm512_mullo_epi32(acc[g][t], sc));
  }
  pin<G, T>(isum);
}

// The GEMM tile's Q6_K steps (gemm_tile in matmul_q8k_avx512.h).
struct Q6KGemm {
  static constexpr size_t kMain = kMainQ6, kMeta = kMetaQ6, kActBytes = kBB;
  static constexpr size_t kDOffset = 16 * kRows;
  static constexpr bool kMin = false;
  template <int G, int T>
  LUMEN_KQ_INLINE void block(const uint8_t* const q[G], const uint8_t* const m[G], const uint8_t* const a[T],
                             __m512i isum[G][T], float (*)[T][16]) {
    for (int h = 0; h < 2; h++)
      for (int kh = 0; kh < 2; kh++) {
        gemm_slice<G, T, 0, false>(q, m, a, h, kh, isum);
        gemm_slice<G, T, 0, true>(q, m, a, h, kh, isum);
        gemm_slice<G, T, 1, false>(q, m, a, h, kh, isum);
        gemm_slice<G, T, 1, true>(q, m, a, h, kh, isum);
      }
  }
};

void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  if (n_tokens <= Kq::kTileTokens) return Q6KGemv::compute(w, act, stride, n_tokens, y, ldy, r0, r1);
  gemm<Q6KGemm>(w, act, stride, n_tokens, y, ldy, r0, r1,
                (static_cast<size_t>(w.n_in / kBlock) * (kMainQ6 + kMetaQ6) + 63) / 64 * 64);
}

}  // namespace

using Q2KAvx512 = kquant::SlicesKernel<kquant::avx512::Kq, kquant::Q2K>;
using Q3KAvx512 = kquant::SlicesKernel<kquant::avx512::Kq, kquant::Q3K>;

const MatmulKernel kMatmulQ2_KAvx512 = {"q2_K/avx512-vnni",       GgmlType::Q2_K,     Isa::Avx512,
                                        kquant::avx512::Kq::kRows, kquant::avx512::Kq::pack, kquant::act_row_bytes_plain,
                                        Q2KAvx512::convert,       Q2KAvx512::compute};
const MatmulKernel kMatmulQ3_KAvx512 = {"q3_K/avx512-vnni",       GgmlType::Q3_K,     Isa::Avx512,
                                        kquant::avx512::Kq::kRows, kquant::avx512::Kq::pack, kquant::act_row_bytes_corr,
                                        Q3KAvx512::convert,       Q3KAvx512::compute};
const MatmulKernel kMatmulQ6_KAvx512 = {
    "q6_K/avx512-vnni",         GgmlType::Q6_K, Isa::Avx512, kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_corr, Q6KGemv::convert, compute};

}  // namespace lumen
