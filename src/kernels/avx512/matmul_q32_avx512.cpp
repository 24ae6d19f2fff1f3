// The 32-element block kernels on AVX-512 VNNI (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL):
// kernels/generic/q32_tile.h's tile over Q32Isa, and the drivers that pick its shapes.
// Everything here has internal linkage and uses no library templates: an inline function
// instantiated in an AVX-512 translation unit could be picked by the linker for baseline callers.
//
// Layout: kernels/quant_pack.h. Per block and group of 16 rows, 8 vpdpbusd (one per 4-quant
// chunk) of the 16 rows' unsigned quants with a broadcast chunk of the token's int8 activation
// leave one int32 dot per row in the 16 lanes; the accumulator starts at the token's block
// correction (-bias * sum(a)) that undoes the unsigned offset of the weights. The block's
// int32 dots then meet d_w (16 lanes, fp16 -> f32) * d_a in one FMA per (row group, token).
// A tile of G groups x T tokens shares every weight vector across T tokens and every
// activation broadcast across G groups.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/avx512/matmul_avx512.h"
#include "kernels/avx512/simd_avx512.h"
#include "kernels/generic/q32_tile.h"

namespace lumen {
namespace {

// A lone token's stream (decode): row groups per tile and block pairs its streams prefetch
// ahead (Q32Prefetch::ahead). Each format chooses by the row length in blocks (nb).
struct Q32Gemv {
  int groups;
  int64_t ahead;
};

// From this many blocks (4,096 elements: an FFN's down projection, wide attention outputs) a
// row group of Q4_0 or IQ4_NL is 36 KiB or more, and a lone token's four group streams, each
// prefetched 2 pairs ahead, read faster than one stream 24 pairs ahead; at 2,048-2,304
// elements the runs were mixed (11% faster to 25% slower by shape and distance).
// BM_Q32Matmul tokens:1 threads:2, medians of 5 alternations: Q4_0 5632 x 2048 0.131 -> 0.108
// ms; 4096 / 5632 / 9216 x 4096 (4 pairs ahead, within 5% of 2 on the TinyLlama shapes): 242 ->
// 213, 309 -> 234, 492 -> 364 us. Decode (`lumen bench -p 0 -n 32 -r 2`, medians of 6
// alternations): TinyLlama Q4_0 78.9 -> 88.6 tok/s, Gemma 2 2B Q4_0 37.3 -> 43.0; IQ4_NL (4
// alternations) 90.2 -> 95.1. Q4_1 and Q5_0 gained ~1% in the model (within noise) and were up
// to 1.5x slower in the micro-benchmark: one group for them (kQ32OneStream).
constexpr int64_t kQ32LongRowBlocks = 128;
// One group 24 pairs (13.5 KiB) ahead: the nibble formats' lone-token stream (below).
constexpr Q32Gemv kQ32OneStream{1, 24};
// Q4_0's and IQ4_NL's lone-token stream: four groups 2 pairs ahead from kQ32LongRowBlocks blocks.
constexpr Q32Gemv q32_gemv_by_row_length(int64_t nb) {
  return nb >= kQ32LongRowBlocks ? Q32Gemv{4, 2} : kQ32OneStream;
}

// ---- weight formats: how to get the two chunk vectors of pair p (elements 4p.. and 16+4p..) ----

struct Q32FmtQ8_0 : q32::Layout<GgmlType::Q8_0> {
  static constexpr int kActBias = 128;
  static constexpr int kGemvPairTokens = 2;  // from this many tokens, GEMV tiles take 2 groups
  // Block pairs a tile of 2+ tokens prefetches ahead of its streams (Q32Prefetch::ahead);
  // measured on the TinyLlama shapes at 2..9 tokens (lumen bench --verify-cost).
  static constexpr int64_t kStreamAhead = 2;
  // Four groups, nothing prefetched: Q8_0's four-group stream gained nothing from 4 or 8 pairs
  // ahead (one group 12 or 24 ahead: 0.85-0.9x of four).
  static constexpr Q32Gemv gemv(int64_t) { return {4, 0}; }
  static inline void unpack(const uint8_t* q, int p, __m512i& v0, __m512i& v1) {
    v0 = _mm512_load_si512(q + 64 * p);
    v1 = _mm512_load_si512(q + 64 * (p + 4));
  }
};

template <GgmlType T>
struct Q32FmtNibbles : q32::Layout<T> {
  static constexpr int kActBias = q32::Layout<T>::kOffset;
  // Measured with the streams prefetched: 2 groups from 3 tokens (Q4_0 TinyLlama, 5 tokens:
  // 17.1 -> 14.2 ms a pass); without the prefetch they had slowed the 2-4 token streams.
  static constexpr int kGemvPairTokens = 3;
  static constexpr int64_t kStreamAhead = 6;
  // One group with 24 pairs (13.5 KiB) prefetched ahead: TinyLlama Q4_0 decode ~1.2x (Q4_1
  // ~1.17x) in alternated runs; 6 and 12 gained less, 48 no more. Rows of Q4_0 from 4,096
  // elements (kQ32LongRowBlocks) stream faster as four groups, each 2 pairs ahead.
  static constexpr Q32Gemv gemv(int64_t nb) {
    return T == GgmlType::Q4_0 ? q32_gemv_by_row_length(nb) : kQ32OneStream;
  }
  static inline void unpack(const uint8_t* q, int p, __m512i& v0, __m512i& v1) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i raw = _mm512_load_si512(q + 64 * p);
    v0 = _mm512_and_si512(raw, m4);
    v1 = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
  }
};
using Q32FmtQ4_0 = Q32FmtNibbles<GgmlType::Q4_0>;
using Q32FmtQ4_1 = Q32FmtNibbles<GgmlType::Q4_1>;

template <GgmlType T>
struct Q32FmtQ5 : q32::Layout<T> {
  static constexpr int kActBias = q32::Layout<T>::kOffset;
  static constexpr int kGemvPairTokens = 6;  // measured: 2 groups slow the 2-4 token streams
  static constexpr int64_t kStreamAhead = 6;  // as the nibbles (4 sequences of TinyLlama ~1.35x)
  // As the nibbles' one group (TinyLlama decode ~1.2-1.3x).
  static constexpr Q32Gemv gemv(int64_t) { return kQ32OneStream; }
  static inline void unpack(const uint8_t* q, int p, __m512i& v0, __m512i& v1) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    const __m512i raw = _mm512_load_si512(q + 64 * p);
    const __mmask64 h0 = _cvtu64_mask64(q32::load<uint64_t>(q + 256 + 16 * p));
    const __mmask64 h1 = _cvtu64_mask64(q32::load<uint64_t>(q + 256 + 16 * p + 8));
    v0 = _mm512_mask_add_epi8(_mm512_and_si512(raw, m4), h0, _mm512_and_si512(raw, m4), b4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
    v1 = _mm512_mask_add_epi8(hi, h1, hi, b4);
  }
};
using Q32FmtQ5_0 = Q32FmtQ5<GgmlType::Q5_0>;
using Q32FmtQ5_1 = Q32FmtQ5<GgmlType::Q5_1>;

struct Q32FmtIq4nl : q32::Layout<GgmlType::IQ4_NL> {
  static constexpr int kActBias = 128;
  static constexpr int kGemvPairTokens = 6;  // measured: 2 groups slow the 2-4 token streams
  static constexpr int64_t kStreamAhead = 6;  // as the nibbles (4 sequences of TinyLlama ~1.35x)
  // As Q4_0: one group (TinyLlama decode ~1.2-1.3x), four for long rows.
  static constexpr Q32Gemv gemv(int64_t nb) { return q32_gemv_by_row_length(nb); }
  static inline void unpack(const uint8_t* q, int p, __m512i& v0, __m512i& v1) {
    // The 16 levels + 128 (all in 1..241), so lookups give unsigned quants with bias 128.
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, static_cast<char>(129), static_cast<char>(141),
                      static_cast<char>(153), static_cast<char>(166), static_cast<char>(181),
                      static_cast<char>(197), static_cast<char>(217), static_cast<char>(241)));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i raw = _mm512_load_si512(q + 64 * p);
    v0 = _mm512_shuffle_epi8(table, _mm512_and_si512(raw, m4));
    v1 = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
  }
};

// ---- AVX-512 as q32_tile.h sees it ----

struct Q32Isa : avx512::Vf {
  static constexpr Isa kIsa = Isa::Avx512;
  static constexpr bool kQ8Biased = true;  // vpdpbusd wants u8 weights: Q8_0 stored q + 128
  static constexpr bool kRowsOuter = false;

  // The int32 dots of block b: groups g x tokens t, each started at the token's correction.
  template <class F, int G, int T>
  LUMEN_V_INLINE void dots(const uint8_t* pair, int64_t hb, size_t group_bytes, const Q32ActBlock* const a[T],
                           int64_t b, __m512i iacc[G][T]) {
    // Few tiles in flight (decode): a second accumulator halves the dependency chain.
    constexpr bool kSplit = G * T <= 2;
    __m512i iacc2[G][T];
    for (int g = 0; g < G; g++)
      for (int t = 0; t < T; t++) iacc2[g][t] = _mm512_setzero_si512();
    for (int t = 0; t < T; t++) {
      const __m512i c = F::kActBias != 0 ? _mm512_set1_epi32(a[t][b].corr) : _mm512_setzero_si512();
      for (int g = 0; g < G; g++) iacc[g][t] = c;
    }
    const uint8_t* qb = pair + 2 * F::kScaleBytes + hb * F::kQBytes;
    for (int p = 0; p < 4; p++) {
      __m512i v0[G], v1[G];
      for (int g = 0; g < G; g++) F::unpack(qb + g * group_bytes, p, v0[g], v1[g]);
      for (int t = 0; t < T; t++) {
        const __m512i a0 = _mm512_set1_epi32(q32::load<int32_t>(a[t][b].qs + 4 * p));
        const __m512i a1 = _mm512_set1_epi32(q32::load<int32_t>(a[t][b].qs + 16 + 4 * p));
        for (int g = 0; g < G; g++) {
          iacc[g][t] = _mm512_dpbusd_epi32(iacc[g][t], v0[g], a0);
          if constexpr (kSplit) iacc2[g][t] = _mm512_dpbusd_epi32(iacc2[g][t], v1[g], a1);
          else iacc[g][t] = _mm512_dpbusd_epi32(iacc[g][t], v1[g], a1);
        }
      }
    }
    if constexpr (kSplit)
      for (int g = 0; g < G; g++)
        for (int t = 0; t < T; t++) iacc[g][t] = _mm512_add_epi32(iacc[g][t], iacc2[g][t]);
  }
  // The tile's rows of [row0, row_end) to y.
  template <int G, int T>
  LUMEN_V_INLINE void store(const __m512 (*facc)[T], float* y, int64_t ldy, int64_t row0, int64_t row_end) {
    for (int g = 0; g < G; g++) {
      const int64_t r = row0 + g * kQ32GroupRows;
      const int64_t n = row_end - r;
      if (n <= 0) break;
      const __mmask16 m = n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
      for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + t * ldy + r, m, facc[g][t]);
    }
  }
};
using Q32Prefetch = q32::Prefetch;
constexpr Q32Prefetch kNoPrefetch{};

template <class F, int G>
inline void q32_tile_n(int64_t n_tok, const uint8_t* g0, size_t group_bytes, int64_t nb, const uint8_t* act,
                       size_t act_stride, float* y, int64_t ldy, int64_t row0, int64_t row_end, const Q32Prefetch& pf = {}) {
  switch (n_tok) {
    case 1: q32::tile<Q32Isa, F, G, 1>(g0, group_bytes, nb, act, act_stride, y, ldy, row0, row_end, pf); break;
    case 2: q32::tile<Q32Isa, F, G, 2>(g0, group_bytes, nb, act, act_stride, y, ldy, row0, row_end, pf); break;
    case 3: q32::tile<Q32Isa, F, G, 3>(g0, group_bytes, nb, act, act_stride, y, ldy, row0, row_end, pf); break;
    case 4: q32::tile<Q32Isa, F, G, 4>(g0, group_bytes, nb, act, act_stride, y, ldy, row0, row_end, pf); break;
    case 5: q32::tile<Q32Isa, F, G, 5>(g0, group_bytes, nb, act, act_stride, y, ldy, row0, row_end, pf); break;
    default: q32::tile<Q32Isa, F, G, 6>(g0, group_bytes, nb, act, act_stride, y, ldy, row0, row_end, pf); break;
  }
}

inline const uint8_t* q32_min_ptr(const uint8_t* a, const uint8_t* b) { return a < b ? a : b; }

// The MatmulKernel::compute of format F.
// Up to 12 tokens (decode, small batches, verification of draft tokens): each row group is
// streamed once from DRAM, one group (or pair) at a time so each thread reads one sequential
// stream (measured: several groups in flight slowed the nibble formats' streams; a lone token
// takes F::gemv's groups: four for Q8_0, and for Q4_0's and IQ4_NL's long rows), with every
// token tile of up to 6 tokens run over it back to back (the later tiles find the group in
// L1/L2). From F::kGemvPairTokens tokens two groups share each activation broadcast (Q8_0 from
// 2 tokens: 4 sequences of TinyLlama 133 -> 184 tok/s; nibble formats only at 6, where it
// helps). The first tile prefetches its streams ahead (Q32Prefetch::ahead: F::gemv's pairs for
// one token, else F::kStreamAhead), across group boundaries up to the end of this call's rows.
// More tokens: tiles of 2 groups x 6 tokens (24 accumulators, no spills) over row blocks whose
// packed weights (~128 KiB) stay in L2 while every token tile passes over them.
template <class F>
void q32_compute(const WeightMatrix& w, const uint8_t* act, size_t act_stride, int64_t n_tokens, float* y,
                 int64_t ldy, int64_t r0, int64_t r1) {
  constexpr int kTile = 6;
  const int64_t nb = w.n_in / kQ32Block;
  const size_t group_bytes = static_cast<size_t>((nb + 1) / 2) * 2 * (F::kQBytes + F::kScaleBytes);
  const uint8_t* base = w.packed.get()->data;
  const int64_t g_begin = r0 / kQ32GroupRows;
  const int64_t g_end = (r1 + kQ32GroupRows - 1) / kQ32GroupRows;
  if (n_tokens <= 2 * kTile) {
    // Token tiles of even sizes: 7 tokens as 4 + 3, not 6 + 1.
    const int64_t n_tiles = (n_tokens + kTile - 1) / kTile;
    const int64_t tile = (n_tokens + n_tiles - 1) / n_tiles;
    const Q32Gemv lone = F::gemv(nb);
    Q32Prefetch stream_pf;
    stream_pf.ahead = n_tokens == 1 ? lone.ahead : F::kStreamAhead;
    stream_pf.end = base + g_end * group_bytes;
    for (int64_t g = g_begin; g < g_end;) {
      const uint8_t* gp = base + g * group_bytes;
      if (n_tokens == 1 && lone.groups == 4 && g + 4 <= g_end) {
        q32::tile<Q32Isa, F, 4, 1>(gp, group_bytes, nb, act, act_stride, y, ldy, g * kQ32GroupRows, r1, stream_pf);
        g += 4;
        continue;
      }
      // Several tokens are compute, not only a stream: two groups share each broadcast.
      const int n_groups = tile >= F::kGemvPairTokens && g + 2 <= g_end ? 2 : 1;
      for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
        const int64_t nt = q32::min64(tile, n_tokens - t0);
        const Q32Prefetch& pf = t0 == 0 ? stream_pf : kNoPrefetch;
        if (n_groups == 2)
          q32_tile_n<F, 2>(nt, gp, group_bytes, nb, act + t0 * act_stride, act_stride, y + t0 * ldy, ldy,
                           g * kQ32GroupRows, r1, pf);
        else
          q32_tile_n<F, 1>(nt, gp, group_bytes, nb, act + t0 * act_stride, act_stride, y + t0 * ldy, ldy,
                           g * kQ32GroupRows, r1, pf);
      }
      g += n_groups;
    }
    return;
  }
  int64_t block_groups = static_cast<int64_t>((128u << 10) / group_bytes) & ~int64_t{1};
  if (block_groups < 2) block_groups = 2;
  // The first token tile over a row block streams its weights from DRAM; the later ones find
  // them in L2. While those run, the next row block is prefetched, spread evenly over their
  // blocks, so the next first pass streams from L2 too (only within this call's rows).
  const int64_t n_tiles = (n_tokens + kTile - 1) / kTile;
  for (int64_t gb = g_begin; gb < g_end; gb += block_groups) {
    const int64_t ge = q32::min64(g_end, gb + block_groups);
    Q32Prefetch pf;
    pf.next = base + ge * group_bytes;
    pf.end = base + q32::min64(g_end, ge + block_groups) * group_bytes;
    const int64_t steps = (n_tiles - 1) * ((ge - gb + 1) / 2) * nb;
    const int64_t lines = static_cast<int64_t>(pf.end - pf.next) / 64;
    pf.lines = steps > 0 ? (lines + steps - 1) / steps : 0;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTile) {
      const int64_t nt = q32::min64(kTile, n_tokens - t0);
      const uint8_t* at = act + t0 * act_stride;
      float* yt = y + t0 * ldy;
      for (int64_t g = gb; g < ge; g += 2) {
        const uint8_t* gp = base + g * group_bytes;
        const Q32Prefetch& tile_pf = t0 == 0 ? kNoPrefetch : pf;  // by reference: q32::tile says why
        if (g + 1 < ge)
          q32_tile_n<F, 2>(nt, gp, group_bytes, nb, at, act_stride, yt, ldy, g * kQ32GroupRows, r1, tile_pf);
        else
          q32_tile_n<F, 1>(nt, gp, group_bytes, nb, at, act_stride, yt, ldy, g * kQ32GroupRows, r1, tile_pf);
        if (t0 > 0) pf.next = q32_min_ptr(pf.end, pf.next + pf.lines * nb * 64);
      }
    }
  }
}

}  // namespace

// vpdpbusd multiplies unsigned weights with signed activations, so every format is made
// unsigned and the activation correction -bias * sum(a) (once per token and block) undoes the
// offset exactly: Q8_0 repacked as q + 128; IQ4_NL's levels looked up + 128; Q4_0's nibbles
// (offset 8) as they are; Q5_0's fifth bits (64-bit masks per chunk vector) set bit 4 with one
// masked byte add (offset 16). Q4_1 / Q5_1 (x = d*q + m) against Q8_1 need no offset: a block is
// d_w*d_a*dot(q, a) + m_w*s_a (s_a = d_a*sum(a)).
const MatmulKernel kMatmulQ8_0Avx512 =
    q32::kernel<Q32Isa, Q32FmtQ8_0>("q8_0/avx512-vnni", q32_compute<Q32FmtQ8_0>);
const MatmulKernel kMatmulIq4NlAvx512 =
    q32::kernel<Q32Isa, Q32FmtIq4nl>("iq4_nl/avx512-vnni", q32_compute<Q32FmtIq4nl>);
const MatmulKernel kMatmulQ4_0Avx512 =
    q32::kernel<Q32Isa, Q32FmtQ4_0>("q4_0/avx512-vnni", q32_compute<Q32FmtQ4_0>);
const MatmulKernel kMatmulQ5_0Avx512 =
    q32::kernel<Q32Isa, Q32FmtQ5_0>("q5_0/avx512-vnni", q32_compute<Q32FmtQ5_0>);
const MatmulKernel kMatmulQ4_1Avx512 =
    q32::kernel<Q32Isa, Q32FmtQ4_1>("q4_1/avx512-vnni", q32_compute<Q32FmtQ4_1>);
const MatmulKernel kMatmulQ5_1Avx512 =
    q32::kernel<Q32Isa, Q32FmtQ5_1>("q5_1/avx512-vnni", q32_compute<Q32FmtQ5_1>);

}  // namespace lumen
