// What the K-quant traits of every ISA (avx2::Kq, avx512::Kq in matmul_q8k_<isa>.h) share,
// written once over its SIMD layer V: the group geometry (one 32-bit lane per row of a kRows-row
// group, so one weight load holds 4 bytes of each row), activation broadcasts, the prefetch of
// the next block and the tile walk. Each ISA's Kq derives from KqBase and adds the integer steps
// that differ (dot_u8s8, scale_sums, ...: VNNI on AVX-512, vpmaddubsw pair sums on AVX2).
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#define LUMEN_KQT_INLINE static inline __attribute__((always_inline))

namespace lumen::kquant {
namespace {

// Calls fn.template operator()<N>() for the N in 1..kMax equal to n (nothing for other n): a
// run-time count (of tokens, of row groups) to the tile compiled for it.
template <int kMax, class Fn>
LUMEN_KQT_INLINE void with_count(int64_t n, Fn&& fn) {
  if constexpr (kMax > 0) {
    if (n == kMax) fn.template operator()<kMax>();
    else with_count<kMax - 1>(n, fn);
  }
}

// kTile: the token tile of the GEMV path, the most tokens whose accumulators fit the ISA's
// registers beside the weights and per-block sums.
template <class V, int kGroupRows, int kTile>
struct KqBase : V {
  static_assert(kTile >= 2 && kTile <= 4);
  using I = typename V::I;
  using F = typename V::F;
  static constexpr int kRows = kGroupRows;
  static constexpr int kBytes = 4 * kGroupRows;  // one weight load: 4 bytes of each row
  static constexpr int kTileTokens = kTile;

  // 16-bit lanes shifted by a constant (0: v itself).
  template <int kShift>
  LUMEN_KQT_INLINE I srl16(I v) {
    if constexpr (kShift == 0) return v;
    else return V::srl_i16(v, kShift);
  }
  template <int kShift>
  LUMEN_KQT_INLINE I sll16(I v) {
    if constexpr (kShift == 0) return v;
    else return V::sll_i16(v, kShift);
  }
  // 4 activation bytes (or two int16) at p, in every 32-bit lane; the float at p in every lane.
  LUMEN_KQT_INLINE I bcast32(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return V::set1_i(v);
  }
  LUMEN_KQT_INLINE F bcast_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return V::set1(v);
  }
  // Software prefetch of `bytes` (a multiple of 64) at p, kPrefetchBlocks blocks ahead of the
  // weights being read (AVX-512: 1 to 8 measured about the same; 0 is slower): the GEMV streams
  // weights from DRAM and the hardware prefetchers alone do not keep enough lines in flight for
  // one core.
  LUMEN_KQT_INLINE void prefetch(const uint8_t* p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
  static constexpr int kPrefetchBlocks = 1;
  // A decode step's few tokens (one token tile) read every weight byte once, from DRAM, and one
  // row group's stream, prefetched a block ahead, keeps little more than that block in flight
  // (AVX-512 Q2_K: 1.3 KiB; AVX2's 8-row groups half of it). Their tile therefore walks kGroups
  // row groups side by side, a block of each in turn: kGroups streams. TinyLlama-shape decode on
  // 2 threads, 4 groups against 1 (`lumen bench -p 0 -n 32`, 4-8 alternations per set, medians
  // of the ratios): AVX-512 Q2_K 1.10-1.48x, Q3_K 1.16-1.47x, Q4_K 1.00-1.09x, Q5_K 0.94-1.06x
  // (the low ends in a slow stretch of the memory, where either walk reaches it), Q6_K 0.91x (3
  // groups 0.92x); AVX2 Q2_K 1.39x, Q3_K 1.29-1.35x, Q4_K 1.19-1.21x, Q5_K 1.04x, Q6_K
  // 1.18-1.48x. Engine decode of 2 and 4 sequences (`--batch 2`/`4`, 3-4 alternations): AVX-512
  // Q2_K 1.29x at 2 and 1.04x at 4, Q3_K 1.11x at 4, Q4_K 1.03x at both; AVX2 at 2 Q3_K 1.09x,
  // Q4_K 1.02x. 2 groups were slower than 1 in the Q4_K and Q6_K micro-benchmarks. Each format
  // says how many (its kStreamGroups; README, "Every weight format against the roofline").
  // Runs tile.template operator()<G>(g) over the row groups of rows [r0, r1): kGroups at a time
  // from g = r0 / kRows, then the remainder as one narrower tile.
  template <int kGroups, class Fn>
  LUMEN_KQT_INLINE void for_stream_groups(int64_t r0, int64_t r1, Fn&& tile) {
    const int64_t g_end = (r1 + kRows - 1) / kRows;
    int64_t g = r0 / kRows;
    for (; g + kGroups <= g_end; g += kGroups) tile.template operator()<kGroups>(g);
    with_count<kGroups - 1>(g_end - g, [&]<int G>() { tile.template operator()<G>(g); });
  }
  // Runs tile.template operator()<T>(g, t0) over the row groups g of rows [r0, r1) and the token
  // tiles of [0, n_tokens): kTile tokens (at most 4), then the remainder as one narrower tile.
  // Groups go in batches whose weights fit about 256 KiB (L2), and each batch runs all token
  // tiles, so a token tile's activations stay in L1 while the batch's groups reuse them.
  template <class Fn>
  LUMEN_KQT_INLINE void for_tiles(int64_t r0, int64_t r1, int64_t n_tokens, size_t group_bytes, Fn&& tile) {
    const int64_t g_end = (r1 + kRows - 1) / kRows;
    const int64_t batch =
        group_bytes >= (size_t{256} << 10) ? 1 : static_cast<int64_t>((size_t{256} << 10) / group_bytes);
    for (int64_t gb = r0 / kRows; gb < g_end; gb += batch) {
      const int64_t ge = gb + batch < g_end ? gb + batch : g_end;
      int64_t t = 0;
      for (; t + kTile <= n_tokens; t += kTile)
        for (int64_t g = gb; g < ge; g++) tile.template operator()<kTile>(g, t);
      for (int64_t g = gb; g < ge; g++)  // the remainder: 1..kTile - 1 tokens
        with_count<kTile - 1>(n_tokens - t, [&]<int T>() { tile.template operator()<T>(g, t); });
    }
  }
};

}  // namespace
}  // namespace lumen::kquant
