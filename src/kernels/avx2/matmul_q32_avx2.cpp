// The 32-element block kernels on AVX2 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL):
// kernels/generic/q32_tile.h's tile over Q32Isa, whose vectors hold one 8-row half of a group
// (a 64-byte chunk vector read as two halves). Without VNNI the int8 dot is vpmaddubsw
// (u8 x s8 -> s16 pairs, saturating) + vpmaddwd with ones (-> s32). Saturation is avoided by
// construction:
//  - signed weights (Q8_0 stored unbiased, IQ4_NL levels) use the sign trick |w| x sign(a, w):
//    a pair is at most 2 * 128 * 127 = 32512, so each chunk is widened right away;
//  - unsigned nibbles (Q4_0/Q4_1, 0..15) stay in s16 for the whole block (16 products of at
//    most 15 * 127 per lane = 30480), 5-bit quants (Q5_0/Q5_1) for one pair of chunks.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/avx2/matmul_avx2.h"
#include "kernels/avx2/simd_avx2.h"
#include "kernels/generic/q32_tile.h"

namespace lumen {
namespace {

// ---- weight formats. Half h of chunk vectors p and p+4 (rows 8h..8h+7). ----

enum class Q32Kind { Signed, Nibble4, Nibble5 };

struct Q32FmtQ8_0 : q32::Layout<GgmlType::Q8_0> {
  static constexpr int kActBias = 0;
  static constexpr Q32Kind kKind = Q32Kind::Signed;
  // Signed values and their magnitudes.
  static inline void unpack(const uint8_t* q, int p, int h, __m256i& s0, __m256i& a0, __m256i& s1, __m256i& a1) {
    s0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * h));
    s1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * (p + 4) + 32 * h));
    a0 = _mm256_abs_epi8(s0);
    a1 = _mm256_abs_epi8(s1);
  }
};

struct Q32FmtIq4nl : q32::Layout<GgmlType::IQ4_NL> {
  static constexpr int kActBias = 0;
  static constexpr Q32Kind kKind = Q32Kind::Signed;
  static inline void unpack(const uint8_t* q, int p, int h, __m256i& s0, __m256i& a0, __m256i& s1, __m256i& a1) {
    const __m256i levels = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                            -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    const __m256i mags = _mm256_abs_epi8(levels);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * h));
    const __m256i i0 = _mm256_and_si256(raw, m4);
    const __m256i i1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    s0 = _mm256_shuffle_epi8(levels, i0);
    a0 = _mm256_shuffle_epi8(mags, i0);
    s1 = _mm256_shuffle_epi8(levels, i1);
    a1 = _mm256_shuffle_epi8(mags, i1);
  }
};

// Bit j of m (j < 32) -> byte j of the result: 0x10 when set, else 0.
inline __m256i expand_bits16(uint32_t m) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(m)), spread);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

template <GgmlType kT>
struct Q32FmtNibbles : q32::Layout<kT> {
  using L = q32::Layout<kT>;
  static constexpr int kActBias = L::kOffset;
  static constexpr Q32Kind kKind = L::kFive ? Q32Kind::Nibble5 : Q32Kind::Nibble4;
  // Unsigned quants of chunks p and p+4.
  static inline void unpack(const uint8_t* q, int p, int h, __m256i& u0, __m256i& u1) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * h));
    u0 = _mm256_and_si256(raw, m4);
    u1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if constexpr (L::kFive) {
      u0 = _mm256_or_si256(u0, expand_bits16(q32::load<uint32_t>(q + 256 + 16 * p + 4 * h)));
      u1 = _mm256_or_si256(u1, expand_bits16(q32::load<uint32_t>(q + 256 + 16 * p + 8 + 4 * h)));
    }
  }
};
using Q32FmtQ4_0 = Q32FmtNibbles<GgmlType::Q4_0>;
using Q32FmtQ4_1 = Q32FmtNibbles<GgmlType::Q4_1>;
using Q32FmtQ5_0 = Q32FmtNibbles<GgmlType::Q5_0>;
using Q32FmtQ5_1 = Q32FmtNibbles<GgmlType::Q5_1>;

// ---- AVX2 as q32_tile.h sees it ----

struct Q32Isa : avx2::Vf {
  static constexpr Isa kIsa = Isa::Avx2;
  static constexpr bool kQ8Biased = false;  // Q8_0 kept signed for the sign trick
  static constexpr bool kRowsOuter = true;

  // The dots of block b: halves h (rows 8h.. of group h / 2) x tokens t; for Nibble4 the s16
  // pair sums of the whole block, which finish widens (and where F::kActBias, corrects).
  template <class F, int H, int T>
  LUMEN_V_INLINE void dots(const uint8_t* pair, int64_t hb, size_t group_bytes, const Q32ActBlock* const a[T],
                           int64_t b, __m256i dot[H][T]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t* qb = pair + 2 * F::kScaleBytes + hb * F::kQBytes;
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++) dot[h][t] = _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
      for (int h = 0; h < H; h++) {
        const uint8_t* q = qb + (h >> 1) * group_bytes;
        if constexpr (F::kKind == Q32Kind::Signed) {
          __m256i s0, m0, s1, m1;
          F::unpack(q, p, h & 1, s0, m0, s1, m1);
          for (int t = 0; t < T; t++) {
            const __m256i a0 = _mm256_set1_epi32(q32::load<int32_t>(a[t][b].qs + 4 * p));
            const __m256i a1 = _mm256_set1_epi32(q32::load<int32_t>(a[t][b].qs + 16 + 4 * p));
            const __m256i d0 = _mm256_madd_epi16(_mm256_maddubs_epi16(m0, _mm256_sign_epi8(a0, s0)), ones);
            const __m256i d1 = _mm256_madd_epi16(_mm256_maddubs_epi16(m1, _mm256_sign_epi8(a1, s1)), ones);
            dot[h][t] = _mm256_add_epi32(dot[h][t], _mm256_add_epi32(d0, d1));
          }
        } else {
          __m256i u0, u1;
          F::unpack(q, p, h & 1, u0, u1);
          for (int t = 0; t < T; t++) {
            const __m256i a0 = _mm256_set1_epi32(q32::load<int32_t>(a[t][b].qs + 4 * p));
            const __m256i a1 = _mm256_set1_epi32(q32::load<int32_t>(a[t][b].qs + 16 + 4 * p));
            const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(u0, a0), _mm256_maddubs_epi16(u1, a1));
            if constexpr (F::kKind == Q32Kind::Nibble4) dot[h][t] = _mm256_add_epi16(dot[h][t], s16);
            else dot[h][t] = _mm256_add_epi32(dot[h][t], _mm256_madd_epi16(s16, ones));
          }
        }
      }
    }
  }
  template <class F>
  LUMEN_V_INLINE __m256i finish(__m256i dot, const Q32ActBlock& a) {
    if constexpr (F::kKind == Q32Kind::Nibble4) dot = _mm256_madd_epi16(dot, _mm256_set1_epi16(1));
    if constexpr (F::kActBias != 0) dot = _mm256_add_epi32(dot, _mm256_set1_epi32(a.corr));
    return dot;
  }
  // The tile's rows of [row0, row_end) to y (a partial last half through a buffer).
  template <int H, int T>
  LUMEN_V_INLINE void store(const __m256 (*facc)[T], float* y, int64_t ldy, int64_t row0, int64_t row_end) {
    for (int h = 0; h < H; h++) {
      const int64_t r = row0 + h * 8;
      const int64_t n = row_end - r;
      if (n <= 0) break;
      for (int t = 0; t < T; t++) {
        if (n >= 8) {
          _mm256_storeu_ps(y + t * ldy + r, facc[h][t]);
        } else {
          alignas(32) float tmp[8];
          _mm256_store_ps(tmp, facc[h][t]);
          for (int64_t i = 0; i < n; i++) y[t * ldy + r + i] = tmp[i];
        }
      }
    }
  }
};

// The MatmulKernel::compute of format F: like the AVX-512 driver (row blocks that fit in L2,
// swept by token tiles), with tiles of one group x 3 tokens (signed formats) or x 2 tokens
// (nibbles: their s16 block sums take more registers); one group x 1 token for decode, one
// sequential stream per thread (measured: two groups in flight spill and run ~1.5x slower).
template <class F>
void q32_compute(const WeightMatrix& w, const uint8_t* act, size_t act_stride, int64_t n_tokens, float* y,
                 int64_t ldy, int64_t r0, int64_t r1) {
  constexpr int64_t kTile = F::kKind == Q32Kind::Signed ? 3 : 2;
  const int64_t nb = w.n_in / kQ32Block;
  const size_t group_bytes = static_cast<size_t>((nb + 1) / 2) * 2 * (F::kQBytes + F::kScaleBytes);
  const uint8_t* base = w.packed.get()->data;
  const int64_t g_begin = r0 / kQ32GroupRows;
  const int64_t g_end = (r1 + kQ32GroupRows - 1) / kQ32GroupRows;
  int64_t block_groups = static_cast<int64_t>((128u << 10) / group_bytes);
  if (block_groups < 1 || n_tokens <= kTile) block_groups = g_end - g_begin;
  // A lone token's stream prefetches 24 block pairs ahead, every format (TinyLlama decode in
  // alternated runs: Q4_0 ~1.07x, 12 ahead the same; Q8_0 1.04-1.15x against none, where
  // AVX-512's four-group Q8_0 stream gains nothing).
  q32::Prefetch stream_pf;
  stream_pf.ahead = n_tokens == 1 ? 24 : 0;
  stream_pf.end = base + g_end * group_bytes;
  for (int64_t gb = g_begin; gb < g_end; gb += block_groups) {
    const int64_t ge = q32::min64(g_end, gb + block_groups);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTile) {
      const int64_t nt = q32::min64(kTile, n_tokens - t0);
      const uint8_t* at = act + t0 * act_stride;
      float* yt = y + t0 * ldy;
      for (int64_t g = gb; g < ge; g++) {
        const uint8_t* gp = base + g * group_bytes;
        const int64_t row0 = g * kQ32GroupRows;
        if (nt == 1) q32::tile<Q32Isa, F, 2, 1>(gp, group_bytes, nb, at, act_stride, yt, ldy, row0, r1, stream_pf);
        else if (nt == 2) q32::tile<Q32Isa, F, 2, 2>(gp, group_bytes, nb, at, act_stride, yt, ldy, row0, r1);
        else q32::tile<Q32Isa, F, 2, kTile>(gp, group_bytes, nb, at, act_stride, yt, ldy, row0, r1);
      }
    }
  }
}

}  // namespace

// Q8_0: weights kept signed; vpmaddubsw takes |w| and the activation with w's sign (no
// saturation: |w| <= 128, |a| <= 127). IQ4_NL: byte shuffles map each nibble to its signed level
// and to its magnitude, which meet the activations through the same sign trick (no offset).
// Q4_0: unsigned nibbles straight into vpmaddubsw, s16 sums over the whole block, one vpmaddwd
// per block; the activation correction -8 * sum(a) undoes the offset 8. Q5_0 / Q5_1: the fifth
// bits, stored as bit masks per chunk vector, are spread to bytes (shuffle, test, and) and ORed
// in as bit 4; Q5_0's offset 16 is undone by the correction -16 * sum(a). Q4_1 / Q5_1
// (x = d*q + m) against Q8_1: a block is d_w*d_a*dot(q, a) + m_w*s_a (s_a = d_a*sum(a)).
const MatmulKernel kMatmulQ8_0Avx2 = q32::kernel<Q32Isa, Q32FmtQ8_0>("q8_0/avx2", q32_compute<Q32FmtQ8_0>);
const MatmulKernel kMatmulIq4NlAvx2 = q32::kernel<Q32Isa, Q32FmtIq4nl>("iq4_nl/avx2", q32_compute<Q32FmtIq4nl>);
const MatmulKernel kMatmulQ4_0Avx2 = q32::kernel<Q32Isa, Q32FmtQ4_0>("q4_0/avx2", q32_compute<Q32FmtQ4_0>);
const MatmulKernel kMatmulQ5_0Avx2 = q32::kernel<Q32Isa, Q32FmtQ5_0>("q5_0/avx2", q32_compute<Q32FmtQ5_0>);
const MatmulKernel kMatmulQ4_1Avx2 = q32::kernel<Q32Isa, Q32FmtQ4_1>("q4_1/avx2", q32_compute<Q32FmtQ4_1>);
const MatmulKernel kMatmulQ5_1Avx2 = q32::kernel<Q32Isa, Q32FmtQ5_1>("q5_1/avx2", q32_compute<Q32FmtQ5_1>);

}  // namespace lumen
