// Q2_K, Q3_K and Q6_K x Q8_K matmul (the K-quants whose values are whole u8 per element after
// a few shifts), written once over a SIMD traits struct V (avx2::Kq: 8-row groups; avx512::Kq:
// 16-row groups, VNNI) and included by each ISA's translation unit, which compiles it with
// that ISA's flags. Weights are repacked into kRows-row groups (kquant_pack.h): each V::load
// holds 4 bytes of every row of the group, 4 consecutive elements of 4 slices (32 elements
// apart): Q2_K's 2-bit values in one qs vector; Q3_K's low 2 bits there and the high bit in an
// hmask vector; Q6_K's 6-bit values in three vectors, three of them one AND away and the fourth
// a few shifts. Scale bytes come per group of 16 as [g][r] (Q2_K: 4-bit scale | 4-bit min << 4;
// Q3_K, Q6_K: signed int8, unpacked at load).
//
// Per group the u8 values (Q2_K: 0..3; Q3_K: v = low | high << 2, 0..7; Q6_K: 0..63) meet the
// activation bytes through V::dot_u8s8 and are scaled by V::scale_sums; the offsets of Q3_K
// (q = v - 4) and Q6_K (q = v - 32) are exact from each group's start value, the activation's
// correction term (-4 or -32 x its pair sums, laid out by V::convert_act for V's dot product;
// on AVX2 the int16 lanes end at sum (v - 32) * a, |.| <= 4 * 2 * 32 * 127 = 32512, exact though
// the wrapping adds may overflow on the way). Q2_K's minimums meet the activations' bsums16
// through V::dot_i16. Per block y += (d * da) * isum (Q2_K: y -= (dmin * da) * msum),
// the reference's float evaluation order, so every ISA is bit-identical to it.
// A tile is G row groups of kRows rows x T tokens: one group (V::for_tiles picks T), or for a
// decode step's few tokens kStreamGroups (V::for_stream_groups).
//
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit,
// so the linker can never hand baseline code an AVX-512 body.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kquant_pack.h"
#include "kernels/matmul.h"

#define LUMEN_KQG_INLINE static inline __attribute__((always_inline))

namespace lumen::kquant {
namespace {

struct Q2K {
  static constexpr size_t kMainPerRow = 64;  // qs
  static constexpr size_t kMetaPerRow = 20;  // scale bytes [g][r], fp16 d[r], fp16 dmin[r]
  static constexpr size_t kActBytes = kActBlockBytes;
  static constexpr int kCorrMul = 0;
  static constexpr bool kMins = true;

  template <class V>
  LUMEN_KQG_INLINE typename V::I acc_start(const uint8_t*, int) {
    return V::zero_i();
  }
  static constexpr bool kHalvesOuter = false;  // loop order of the block's slices (as tuned)
  // Row groups a decode step streams side by side, for groups of R rows (for_stream_groups).
  template <int R>
  static constexpr int kStreamGroups = 4;

  template <class V, int H, int J>
  LUMEN_KQG_INLINE void weights(const uint8_t* q, int k, typename V::I& wa, typename V::I& wb) {
    const typename V::I m03 = V::set1_u8(0x03);
    const typename V::I x = V::load(q + V::kBytes * (H * 8 + k));
    wa = V::and_(V::template srl16<2 * J>(x), m03);
    wb = V::and_(V::template srl16<2 * J + 2>(x), m03);
  }
  template <class V>
  LUMEN_KQG_INLINE typename V::I scales(const uint8_t* p) {
    return V::group_scales_u4(p);
  }
};

struct Q3K {
  static constexpr size_t kMainPerRow = 96;  // qs 64, then hmask 32
  static constexpr size_t kMetaPerRow = 18;  // int8 scales [g][r], fp16 d[r]
  static constexpr size_t kActBytes = kActBlockBytesCorr;
  static constexpr int kCorrMul = -4;
  static constexpr bool kMins = false;
  static constexpr bool kHalvesOuter = false;
  template <int R>
  static constexpr int kStreamGroups = 4;

  // Bit kBit of each hmask byte moved to bit 2 (other bits are masked off by the caller).
  template <class V, int kBit>
  LUMEN_KQG_INLINE typename V::I high_bit_to_2(typename V::I hm) {
    if constexpr (kBit < 2) return V::template sll16<2 - kBit>(hm);
    else return V::template srl16<kBit - 2>(hm);
  }
  // Each group's sums start at its correction term: the format's -4 offset, exactly.
  template <class V>
  LUMEN_KQG_INLINE typename V::I acc_start(const uint8_t* a, int g) {
    return V::bcast32(a + kActCorr + 4 * g);
  }
  template <class V, int H, int J>
  LUMEN_KQG_INLINE void weights(const uint8_t* q, int k, typename V::I& wa, typename V::I& wb) {
    const typename V::I m03 = V::set1_u8(0x03), m04 = V::set1_u8(0x04);
    const typename V::I x = V::load(q + V::kBytes * (H * 8 + k));
    const typename V::I hm = V::load(q + 64 * V::kRows + V::kBytes * k);
    wa = V::or_and(V::and_(V::template srl16<2 * J>(x), m03), high_bit_to_2<V, 4 * H + J>(hm), m04);
    wb = V::or_and(V::and_(V::template srl16<2 * J + 2>(x), m03), high_bit_to_2<V, 4 * H + J + 1>(hm), m04);
  }
  template <class V>
  LUMEN_KQG_INLINE typename V::I scales(const uint8_t* p) {
    return V::group_scales_i8(p);
  }
};

struct Q6K {
  static constexpr size_t kMainPerRow = 192;  // 4 values in 3 bytes
  static constexpr size_t kMetaPerRow = 18;   // int8 scales [g][r], fp16 d[r]
  static constexpr size_t kActBytes = kActBlockBytesCorr;
  static constexpr int kCorrMul = -32;
  static constexpr bool kMins = false;
  static constexpr bool kHalvesOuter = true;
  // AVX-512's 16-row groups hold 3.4 KiB per block, and its decode was 0.91x with 4 streams,
  // 0.92x with 3 (KqBase::for_stream_groups); AVX2's 8-row groups gained 1.18-1.48x with 4.
  template <int R>
  static constexpr int kStreamGroups = R >= 16 ? 1 : 4;

  // Byte vector j (0..2) of elements 128h + 32rr + 4k + i.
  template <class V>
  LUMEN_KQG_INLINE typename V::I value_bytes(const uint8_t* q, int h, int k, int j) {
    return V::load(q + V::kBytes * ((h * 8 + k) * 3 + j));
  }
  // The weights of slice 2P (kB: 2P + 1), elements 128h + 64P (+ 32) + 4k.., every row.
  template <class V, int P, bool kB>
  LUMEN_KQG_INLINE typename V::I weight(const uint8_t* q, int h, int k) {
    const typename V::I m3f = V::set1_u8(0x3f);
    if constexpr (P == 0) {
      return V::and_(value_bytes<V>(q, h, k, kB ? 1 : 0), m3f);
    } else if constexpr (kB) {
      return V::and_(value_bytes<V>(q, h, k, 2), m3f);
    } else {
      // The top 2 bits of the three bytes.
      const typename V::I b0 = value_bytes<V>(q, h, k, 0), b1 = value_bytes<V>(q, h, k, 1),
                          b2 = value_bytes<V>(q, h, k, 2);
      const typename V::I lo4 =
          V::or_and(V::and_(V::template srl16<6>(b0), V::set1_u8(0x03)), V::template srl16<4>(b1), V::set1_u8(0x0c));
      return V::or_and(lo4, V::template srl16<2>(b2), V::set1_u8(0x30));
    }
  }
  template <class V>
  LUMEN_KQG_INLINE typename V::I acc_start(const uint8_t* a, int g) {
    return V::bcast32(a + kActCorr + 4 * g);
  }
  template <class V, int H, int J>
  LUMEN_KQG_INLINE void weights(const uint8_t* q, int k, typename V::I& wa, typename V::I& wb) {
    wa = weight<V, J / 2, false>(q, H, k);
    wb = weight<V, J / 2, true>(q, H, k);
  }
  template <class V>
  LUMEN_KQG_INLINE typename V::I scales(const uint8_t* p) {
    return V::group_scales_i8(p);
  }
};

// Slices J and J+1 (elements 128H + 32J + 16kh .. +15 and the same 32 further: groups
// g_a = 8H + 2J + kh and g_a + 2).
template <class V, class Fmt, int T, int H, int J>
LUMEN_KQG_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int kh,
                                 typename V::I isum[T]) {
  using I = typename V::I;
  const int ga = 8 * H + 2 * J + kh, gb = ga + 2;
  I acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) {
    acc_a[t] = Fmt::template acc_start<V>(a[t], ga);
    acc_b[t] = Fmt::template acc_start<V>(a[t], gb);
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    I wa, wb;
    Fmt::template weights<V, H, J>(q, k, wa, wb);
    const int e = 128 * H + 32 * J + 4 * k;
    for (int t = 0; t < T; t++) {
      acc_a[t] = V::dot_u8s8(acc_a[t], wa, V::bcast32(a[t] + e));
      acc_b[t] = V::dot_u8s8(acc_b[t], wb, V::bcast32(a[t] + e + 32));
    }
  }
  const I sa = Fmt::template scales<V>(m + V::kRows * ga), sb = Fmt::template scales<V>(m + V::kRows * gb);
  for (int t = 0; t < T; t++) isum[t] = V::add_i(isum[t], V::add_i(V::scale_sums(acc_a[t], sa), V::scale_sums(acc_b[t], sb)));
}

// acc[t] += one block of one row group (weights q, scales m) with token t's block a[t].
template <class V, class Fmt, int T>
LUMEN_KQG_INLINE void slices_block(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T],
                                   typename V::F acc[T]) {
  using I = typename V::I;
  using F = typename V::F;
  I isum[T];
  for (int t = 0; t < T; t++) isum[t] = V::zero_i();
  if constexpr (Fmt::kHalvesOuter) {
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<V, Fmt, T, 0, 0>(q, m, a, kh, isum);
      slice_pair<V, Fmt, T, 0, 2>(q, m, a, kh, isum);
    }
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<V, Fmt, T, 1, 0>(q, m, a, kh, isum);
      slice_pair<V, Fmt, T, 1, 2>(q, m, a, kh, isum);
    }
  } else {
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<V, Fmt, T, 0, 0>(q, m, a, kh, isum);
      slice_pair<V, Fmt, T, 0, 2>(q, m, a, kh, isum);
      slice_pair<V, Fmt, T, 1, 0>(q, m, a, kh, isum);
      slice_pair<V, Fmt, T, 1, 2>(q, m, a, kh, isum);
    }
  }
  const F d = V::load_f16_rows(m + 16 * V::kRows);
  if constexpr (Fmt::kMins) {
    // Minimums of groups 2p and 2p+1 as the two 16-bit halves of each row's lane.
    I msum[T];
    for (int t = 0; t < T; t++) msum[t] = V::zero_i();
    for (int p = 0; p < 8; p++) {
      const I mins = V::pair_high_nibbles(m + 2 * V::kRows * p);
      for (int t = 0; t < T; t++) msum[t] = V::dot_i16(msum[t], mins, V::bcast32(a[t] + kActBsums16 + 4 * p));
    }
    const F dmin = V::load_f16_rows(m + 18 * V::kRows);
    for (int t = 0; t < T; t++) {
      const F da = V::bcast_f32(a[t] + kActD);
      acc[t] = V::add(acc[t], V::mul_rounded(V::mul(d, da), V::to_float(isum[t])));
      acc[t] = V::sub(acc[t], V::mul_rounded(V::mul(dmin, da), V::to_float(msum[t])));
    }
  } else {
    for (int t = 0; t < T; t++)
      acc[t] = V::add(acc[t], V::mul_rounded(V::mul(d, V::bcast_f32(a[t] + kActD)), V::to_float(isum[t])));
  }
}

// G row groups (gbytes apart from main) x T tokens, block b of each group in turn: G weight
// streams (V::for_stream_groups). rows_left: rows of the matrix from the first group's on.
template <class V, class Fmt, int G, int T>
void slices_tile(const uint8_t* main, size_t gbytes, int64_t nb, const uint8_t* act, size_t stride, float* y,
                 int64_t ldy, int64_t rows_left) {
  using F = typename V::F;
  constexpr size_t kMain = Fmt::kMainPerRow * V::kRows, kMeta = Fmt::kMetaPerRow * V::kRows;
  F acc[G][T];
  for (int g = 0; g < G; g++)
    for (int t = 0; t < T; t++) acc[g][t] = V::zero();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + Fmt::kActBytes * static_cast<size_t>(b);
    for (int g = 0; g < G; g++) {
      const uint8_t* q = main + gbytes * g + kMain * static_cast<size_t>(b);
      const uint8_t* m = main + gbytes * g + kMain * static_cast<size_t>(nb) + kMeta * static_cast<size_t>(b);
      V::prefetch(q + kMain * V::kPrefetchBlocks, kMain);
      V::prefetch(m + kMeta * V::kPrefetchBlocks, kMeta);
      slices_block<V, Fmt, T>(q, m, a, acc[g]);
    }
  }
  for (int g = 0; g < G; g++) {
    const int64_t left = rows_left - int64_t{V::kRows} * g;
    const int n_rows = left < V::kRows ? static_cast<int>(left) : V::kRows;
    for (int t = 0; t < T; t++) V::store_rows(y + ldy * t + V::kRows * g, acc[g][t], n_rows);
  }
}

// The MatmulKernel entry points of format Fmt on ISA V (compute: the tiles of
// V::for_stream_groups for a decode step, else of V::for_tiles).
template <class V, class Fmt>
struct SlicesKernel {
  static void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1) {
    constexpr int kRows = V::kRows;
    const int64_t nb = w.n_in / kBlock;
    const size_t gbytes =
        (static_cast<size_t>(nb) * (Fmt::kMainPerRow + Fmt::kMetaPerRow) * kRows + 63) / 64 * 64;
    const uint8_t* base = w.packed.get()->data;
    if (n_tokens <= V::kTileTokens) {  // a decode step: every weight read once, from DRAM
      V::template for_stream_groups<Fmt::template kStreamGroups<kRows>>(r0, r1, [&]<int G>(int64_t g) {
        with_count<V::kTileTokens>(n_tokens, [&]<int T>() {
          slices_tile<V, Fmt, G, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act, stride, y + g * kRows, ldy,
                                    r1 - g * kRows);
        });
      });
      return;
    }
    V::for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
      slices_tile<V, Fmt, 1, T>(base + gbytes * static_cast<size_t>(g), gbytes, nb, act + stride * t, stride,
                                y + g * kRows + ldy * t, ldy, r1 - g * kRows);
    });
  }
  static void convert(const float* x, uint8_t* dst, int64_t n_in) { V::convert_act(x, dst, n_in, Fmt::kCorrMul); }
};

}  // namespace
}  // namespace lumen::kquant
