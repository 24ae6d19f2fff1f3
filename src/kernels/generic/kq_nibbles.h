// Q4_K and Q5_K x Q8_K matmul (the K-quants of nibbles with 6-bit scales and mins), written once
// over a SIMD traits struct V (avx2::Kq: 8-row groups; avx512::Kq: 16-row groups, VNNI) and
// included by each ISA's translation unit, which compiles it with that ISA's flags. Weights are
// repacked into kRows-row groups (kquant_pack.h): one V::load holds 4 consecutive nibble pairs
// of every row of the group, 4 elements of sub-block 2c (low nibbles) and of sub-block 2c+1
// (high nibbles); Q5_K adds a qh load whose bit 2c+p of each byte is bit 4 of the value.
//
// The u8 values (0..15, Q5_K 0..31) meet the s8 activations through V::dot_u8s8 and each
// sub-block's sums are multiplied by its 6-bit scale through V::scale_sums (exact). Where
// V::kI16Sums (AVX2's vpmaddubsw) the sums are int16 until scale_sums widens them: a whole
// 32-element sub-block fits for Q4_K (|sum| <= 16 * 15 * 127 = 30480), half of one for Q5_K
// (16 * 31 * 127 would not). Per block the float combination repeats the reference's order:
//   y += (d * da) * isum;  y -= (dmin * da) * msum,  msum = sum_s min_s * bsum32_s (V::dot_i16),
// so every ISA is bit-identical to it. A tile is G row groups of kRows rows x T tokens: one group
// (V::for_tiles picks T), or for a decode step's few tokens kStreamGroups (V::for_stream_groups).
//
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kquant_pack.h"
#include "kernels/matmul.h"

#define LUMEN_KQN_INLINE static inline __attribute__((always_inline))

namespace lumen::kquant {
namespace {

template <class V, bool kQ5>
struct K4 {
  using I = typename V::I;
  using F = typename V::F;
  static constexpr int kRows = V::kRows;
  static constexpr size_t kMeta = 16 * kRows;  // 6-bit scales/mins (12R), fp16 d (2R), dmin (2R)
  // Main stream bytes per block: nibbles (128R), then for Q5_K the high bits (32R).
  static constexpr size_t kMain = (kQ5 ? 160 : 128) * kRows;
  // Row groups a decode step streams side by side (KqBase::for_stream_groups).
  static constexpr int kStreamGroups = 4;

  // Bit kBit of each qh byte moved to bit 4 (other bits are masked off by the caller).
  template <int kBit>
  LUMEN_KQN_INLINE I high_bit_to_4(I qh) {
    if constexpr (kBit < 4) return V::template sll16<4 - kBit>(qh);
    else return V::template srl16<kBit - 4>(qh);
  }

  // The weights of sub-blocks 2C (wl) and 2C+1 (wh), elements 4k.. of every row.
  template <int C>
  LUMEN_KQN_INLINE void weights(const uint8_t* q, int k, I& wl, I& wh) {
    const I m0f = V::set1_u8(0x0f);
    const I x = V::load(q + V::kBytes * (8 * C + k));
    wl = V::and_(x, m0f);
    wh = V::and_(V::template srl16<4>(x), m0f);
    if constexpr (kQ5) {
      const I m10 = V::set1_u8(0x10);
      const I qh = V::load(q + 128 * kRows + V::kBytes * k);
      wl = V::or_and(wl, high_bit_to_4<2 * C>(qh), m10);
      wh = V::or_and(wh, high_bit_to_4<2 * C + 1>(qh), m10);
    }
  }

  // isum[t] += scale(2C) * dot(sub-block 2C) + scale(2C+1) * dot(sub-block 2C+1), token t.
  template <int T, int C>
  LUMEN_KQN_INLINE void chunk(const uint8_t* q, const uint8_t* const a[T], const I sc[8], I isum[T]) {
    constexpr int kSpan = kQ5 && V::kI16Sums ? 4 : 8;  // k steps summed before scale_sums
    for (int k0 = 0; k0 < 8; k0 += kSpan) {
      I lo[T], hi[T];
      for (int t = 0; t < T; t++) lo[t] = hi[t] = V::zero_i();
      for (int k = k0; k < k0 + kSpan; k++) {
        I wl, wh;
        weights<C>(q, k, wl, wh);
        for (int t = 0; t < T; t++) {
          lo[t] = V::dot_u8s8(lo[t], wl, V::bcast32(a[t] + 64 * C + 4 * k));
          hi[t] = V::dot_u8s8(hi[t], wh, V::bcast32(a[t] + 64 * C + 32 + 4 * k));
        }
      }
      for (int t = 0; t < T; t++)
        isum[t] = V::add_i(isum[t], V::add_i(V::scale_sums(lo[t], sc[2 * C]), V::scale_sums(hi[t], sc[2 * C + 1])));
    }
  }

  // The 6-bit scales and mins of a group's block (meta bytes [b][q][r][jj], see kquant_pack.h):
  // sc[s] = scale of sub-block s of each row in the form V::scale_sums multiplies, mp[p] =
  // (min 2p, min 2p+1) as the two 16-bit halves of each row's lane, for V::dot_i16 with bsums32.
  LUMEN_KQN_INLINE void unpack_scales(const uint8_t* m, I sc[8], I mp[4]) {
    const I b0 = V::load(m), b1 = V::load(m + V::kBytes), b2 = V::load(m + 2 * V::kBytes);
    const I m63 = V::set1_u8(63), m0f = V::set1_u8(0x0f), m30 = V::set1_u8(0x30);
    const I s_lo = V::and_(b0, m63);
    const I m_lo = V::and_(b1, m63);
    const I s_hi = V::or_(V::and_(b2, m0f), V::and_(V::template srl16<2>(b0), m30));
    const I m_hi = V::or_(V::and_(V::template srl16<4>(b2), m0f), V::and_(V::template srl16<2>(b1), m30));
    const I pairs[4] = {V::widen_lo_u8(s_lo), V::widen_hi_u8(s_lo), V::widen_lo_u8(s_hi), V::widen_hi_u8(s_hi)};
    for (int p = 0; p < 4; p++) V::split_scales(pairs[p], sc[2 * p], sc[2 * p + 1]);
    mp[0] = V::widen_lo_u8(m_lo);
    mp[1] = V::widen_hi_u8(m_lo);
    mp[2] = V::widen_lo_u8(m_hi);
    mp[3] = V::widen_hi_u8(m_hi);
  }

  // (dmin * da) * msum of one block, token with activation block a; mp from unpack_scales.
  LUMEN_KQN_INLINE F min_term(const I mp[4], F dmin, F da, const uint8_t* a) {
    I msum = V::zero_i();
    for (int p = 0; p < 4; p++) msum = V::dot_i16(msum, mp[p], V::bcast32(a + kActBsums32 + 4 * p));
    return V::mul_rounded(V::mul(dmin, da), V::to_float(msum));
  }

  // acc[t] += one block of one row group (weights q, scales m) with token t's block a[t].
  template <int T>
  LUMEN_KQN_INLINE void block(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], F acc[T]) {
    I sc[8], mp[4];
    unpack_scales(m, sc, mp);
    I isum[T];
    for (int t = 0; t < T; t++) isum[t] = V::zero_i();
    chunk<T, 0>(q, a, sc, isum);
    chunk<T, 1>(q, a, sc, isum);
    chunk<T, 2>(q, a, sc, isum);
    chunk<T, 3>(q, a, sc, isum);
    const F d = V::load_f16_rows(m + 12 * kRows);
    const F dmin = V::load_f16_rows(m + 14 * kRows);
    for (int t = 0; t < T; t++) {
      const F da = V::bcast_f32(a[t] + kActD);
      acc[t] = V::add(acc[t], V::mul_rounded(V::mul(d, da), V::to_float(isum[t])));
      acc[t] = V::sub(acc[t], min_term(mp, dmin, da, a[t]));
    }
  }

  // G row groups (gbytes apart from main) x T tokens, block b of each group in turn: G weight
  // streams (V::for_stream_groups). rows_left: rows of the matrix from the first group's on.
  template <int G, int T>
  static void tile(const uint8_t* main, size_t gbytes, int64_t nb, const uint8_t* act, size_t stride, float* y,
                   int64_t ldy, int64_t rows_left) {
    F acc[G][T];
    for (int g = 0; g < G; g++)
      for (int t = 0; t < T; t++) acc[g][t] = V::zero();
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* a[T];
      for (int t = 0; t < T; t++) a[t] = act + stride * t + kActBlockBytes * static_cast<size_t>(b);
      for (int g = 0; g < G; g++) {
        const uint8_t* q = main + gbytes * g + kMain * static_cast<size_t>(b);
        const uint8_t* m = main + gbytes * g + kMain * static_cast<size_t>(nb) + kMeta * static_cast<size_t>(b);
        V::prefetch(q + kMain * V::kPrefetchBlocks, kMain);
        V::prefetch(m + kMeta * V::kPrefetchBlocks, kMeta);
        block<T>(q, m, a, acc[g]);
      }
    }
    for (int g = 0; g < G; g++) {
      const int64_t left = rows_left - int64_t{kRows} * g;
      const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
      for (int t = 0; t < T; t++) V::store_rows(y + ldy * t + kRows * g, acc[g][t], n_rows);
    }
  }

  // Bytes of one row group (all blocks, 64-byte aligned) and where its meta stream starts.
  static size_t group_bytes(int64_t nb) { return (static_cast<size_t>(nb) * (kMain + kMeta) + 63) / 64 * 64; }

  // The MatmulKernel entry points: compute over the tiles of V::for_stream_groups (a decode
  // step) or V::for_tiles.
  static void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1) {
    const int64_t nb = w.n_in / kBlock;
    const size_t gbytes = group_bytes(nb);
    const uint8_t* base = w.packed.get()->data;
    if (n_tokens <= V::kTileTokens) {  // a decode step: every weight read once, from DRAM
      V::template for_stream_groups<kStreamGroups>(r0, r1, [&]<int G>(int64_t g) {
        with_count<V::kTileTokens>(n_tokens, [&]<int T>() {
          tile<G, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act, stride, y + g * kRows, ldy,
                     r1 - g * kRows);
        });
      });
      return;
    }
    V::for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
      tile<1, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act + stride * t, stride, y + g * kRows + ldy * t,
                 ldy, r1 - g * kRows);
    });
  }
  static void convert(const float* x, uint8_t* dst, int64_t n_in) { V::convert_act(x, dst, n_in, 0); }
};

}  // namespace
}  // namespace lumen::kquant
