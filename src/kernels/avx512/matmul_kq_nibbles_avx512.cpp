// Q4_K and Q5_K x Q8_K matmuls, AVX-512 VNNI. Up to Kq::kTileTokens tokens (decode):
// kernels/generic/kq_nibbles.h over avx512::Kq, a tile of 16 rows x T (1..4) tokens, every
// weight vector feeding T tokens (vpdpbusd into int32, scales by vpmulld). More tokens (prefill,
// Q4_K), here alone because only AVX-512's 32 registers hold it: 2 row groups x 6 tokens, one
// sub-block at a time (for_gemm_tiles in matmul_q8k_avx512.h), the 12 sub-block sums in
// registers and the scales read from memory by vpmulld.
#include "kernels/avx512/matmul_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/generic/kq_nibbles.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx512;

using Q4K = K4<Kq, false>;  // kernels/generic/kq_nibbles.h
using Q5K = K4<Kq, true>;
constexpr int kRows = Q4K::kRows;
constexpr size_t kMeta = Q4K::kMeta, kMainQ4 = Q4K::kMain;

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
      const __m512i av = Kq::bcast32(a[t] + 64 * c + 32 * H + 4 * k);
      for (int g = 0; g < G; g++) acc[g][t] = _mm512_dpbusd_epi32(acc[g][t], w[g], av);
    }
  }
  for (int g = 0; g < G; g++)
    for (int t = 0; t < T; t++)
      isum[g][t] = _mm512_add_epi32(isum[g][t], _mm512_mullo_epi32(acc[g][t], sc[g][2 * c + H]));
  pin<G, T>(isum);
}

// The GEMM tile's Q4_K steps (gemm_tile in matmul_q8k_avx512.h).
struct Q4KGemm {
  static constexpr size_t kMain = Q4K::kMain, kMeta = Q4K::kMeta, kActBytes = kActBlockBytes;
  static constexpr size_t kDOffset = 12 * kRows;
  static constexpr bool kMin = true;
  template <int G, int T>
  LUMEN_KQ_INLINE void block(const uint8_t* const q[G], const uint8_t* const m[G], const uint8_t* const a[T],
                             __m512i isum[G][T], float mterm[G][T][16]) {
    __m512i sc[G][8], mp[G][4];
    for (int g = 0; g < G; g++) Q4K::unpack_scales(m[g], sc[g], mp[g]);
    // The minimum terms (dmin * da) * msum need no dot products: computed first, off the
    // critical path at the block's end, and kept in memory.
    for (int g = 0; g < G; g++) {
      const __m512 dmin = Kq::load_f16_rows(m[g] + 14 * kRows);
      for (int t = 0; t < T; t++)
        _mm512_store_ps(mterm[g][t], Q4K::min_term(mp[g], dmin, Kq::bcast_f32(a[t] + kActD), a[t]));
    }
    // A rolled loop over the 4 chunks: the unrolled block (~15 KiB of code) measured slower.
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) {
      gemm_sub<G, T, 0>(q, a, sc, c, isum);
      gemm_sub<G, T, 1>(q, a, sc, c, isum);
    }
  }
};

// Q5_K keeps the 1 x 4 tiles at every token count: a sub-block-at-a-time tile (with the
// high-bit loads and shifts repeated per sub-block) measured no faster.
void compute_q4k(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
                 int64_t ldy, int64_t r0, int64_t r1) {
  if (n_tokens <= Kq::kTileTokens) return Q4K::compute(w, act, stride, n_tokens, y, ldy, r0, r1);
  gemm<Q4KGemm>(w, act, stride, n_tokens, y, ldy, r0, r1, Q4K::group_bytes(w.n_in / kBlock));
}

}  // namespace

const MatmulKernel kMatmulQ4_KAvx512 = {
    "q4_K/avx512-vnni",          GgmlType::Q4_K, Isa::Avx512,   kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_plain, Q4K::convert,   compute_q4k};
const MatmulKernel kMatmulQ5_KAvx512 = {
    "q5_K/avx512-vnni",          GgmlType::Q5_K, Isa::Avx512,  kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_plain, Q5K::convert,   Q5K::compute};

}  // namespace lumen
