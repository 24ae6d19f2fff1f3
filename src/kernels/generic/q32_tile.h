// The 32-element block kernels (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL x Q8_0 activations, Q8_1
// for the formats with a minimum), written once over an ISA's block traits Q (Q32Isa in
// avx2/matmul_q32_avx2.cpp and avx512/matmul_q32_avx512.cpp): the formats' sizes, the register
// tile of G row vectors x T tokens over all blocks, and the MatmulKernel entries. Layout:
// kernels/quant_pack.h.
//
// Q says what differs per ISA: how a block's int32 dot products come out of the packed quants
// (Q::dots: vpdpbusd of unsigned weights on AVX-512 VNNI; vpmaddubsw and vpmaddwd on AVX2, whose
// saturation each format avoids its own way), how many rows one vector holds (Q::kLanes: the
// 16 rows of a group, or one 8-row half) and how they store (Q::store); each ISA's driver picks
// the tiles and what they prefetch. The float side is the same: per block
// y += (d_w * d_a) * dot (+ m_w * s_a for Q4_1/Q5_1), the reference's evaluation order.
//
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "core/dtype.h"
#include "kernels/generic/quantize_act.h"
#include "kernels/matmul.h"
#include "kernels/quant_pack.h"

namespace lumen::q32 {
namespace {

// The T at p, any alignment (activation chunks, the fifth-bit masks).
template <class T>
inline T load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Bytes of a format's quants and scales per block (quant_pack.h): kFive adds the bit masks of
// the fifth bits, kMin the fp16 minimums after the scales. kOffset: the unsigned offset of the
// stored quants (Q4_0: 8, Q5_0: 16; 0 for the signed and the minimum formats).
template <GgmlType kT>
struct Layout {
  static constexpr GgmlType kType = kT;
  static constexpr bool kMin = kT == GgmlType::Q4_1 || kT == GgmlType::Q5_1;
  static constexpr bool kFive = kT == GgmlType::Q5_0 || kT == GgmlType::Q5_1;
  static constexpr int kQBytes = kT == GgmlType::Q8_0 ? 512 : kFive ? 320 : 256;
  static constexpr int kScaleBytes = kMin ? 64 : 32;
  static constexpr int kOffset = kMin ? 0 : kT == GgmlType::Q4_0 ? 8 : kT == GgmlType::Q5_0 ? 16 : 0;
};

// Software prefetch while a tile runs (set by the drivers): `lines` cache lines per block from
// `next` on (into L2), so weights the next tiles stream from DRAM are already on their way;
// `ahead` below. Neither reaches `end`. Changes no arithmetic.
struct Prefetch {
  const uint8_t* next = nullptr;
  const uint8_t* end = nullptr;
  int64_t lines = 0;
  // Block pairs ahead in the tile's own group streams to prefetch into L1, on past a group's end
  // into the groups after it (the driver's stream, up to `end`); 0: none. The hardware
  // prefetcher alone lets the stream stall behind the dot products (measured: the pass of 5
  // tokens of TinyLlama Q8_0 took the sum of its warm compute time and its 1-token stream time,
  // not their maximum; a lone token's nibble stream reads ~1.2x faster 24 pairs ahead).
  int64_t ahead = 0;
};

// The register tile: G row vectors (Q::kLanes rows each, from row0) x T tokens over all nb
// blocks of the groups at g0 (one group per vector, or two 8-row halves of one), results to
// rows [row0, row_end) of y. Fmt::kActBias != 0: the activation block's correction
// -kActBias * sum(a) joins each dot, undoing the weights' unsigned offset. Q::kRowsOuter: each
// row vector's scales meet its dots as soon as they are loaded, which Q::finish completes
// (AVX2: few registers live); else all row vectors' scales are loaded first and every token's
// d_a broadcast serves them all. Each order is the one its ISA's tile was tuned with.
template <class Q, class Fmt, int G, int T>
inline void tile(const uint8_t* g0, size_t group_bytes, int64_t nb, const uint8_t* act, size_t act_stride, float* y,
                 int64_t ldy, int64_t row0, int64_t row_end, const Prefetch& prefetch = {}) {
  using F = typename Q::F;
  using I = typename Q::I;
  constexpr int kHalves = kQ32GroupRows / Q::kLanes;  // row vectors per group
  constexpr int64_t kPair = 2 * (Fmt::kQBytes + Fmt::kScaleBytes);
  // The driver's Prefetch is read field by field: a copy of the whole struct is one vector load,
  // which cannot be forwarded from the driver's scalar store of `next` and so waited for every
  // older store to retire, the previous tile's output rows (cache misses) included (measured:
  // a tenth of a Q4_0 prefill GEMM's time).
  Prefetch pf;
  pf.next = prefetch.next;
  pf.end = prefetch.end;
  pf.lines = prefetch.lines;
  pf.ahead = prefetch.ahead;
  F facc[G][T];
  const Q32ActBlock* a[T];
  for (int t = 0; t < T; t++) a[t] = reinterpret_cast<const Q32ActBlock*>(act + t * act_stride);
  for (int g = 0; g < G; g++)
    for (int t = 0; t < T; t++) facc[g][t] = Q::zero();

  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* pair = g0 + (b >> 1) * kPair;
    const int64_t hb = b & 1;
    for (int64_t i = 0; i < pf.lines && pf.next < pf.end; i++, pf.next += 64)
      _mm_prefetch(reinterpret_cast<const char*>(pf.next), _MM_HINT_T1);
    if (pf.ahead > 0 && hb == 0) {
      // Past the group's end the stream goes on into the driver's next groups (contiguous).
      const uint8_t* far = pair + pf.ahead * kPair;
      for (int g = 0; g < (G + kHalves - 1) / kHalves; g++, far += group_bytes)
        if (far + kPair <= pf.end)
          for (int64_t off = 0; off < kPair; off += 64) _mm_prefetch(reinterpret_cast<const char*>(far + off), _MM_HINT_T0);
    }
    I dot[G][T];
    Q::template dots<Fmt, G, T>(pair, hb, group_bytes, a, b, dot);
    F dw[G], mw[G];
    for (int g = 0; g < G; g++) {
      const uint8_t* s = pair + (g / kHalves) * group_bytes + hb * 32 + (g % kHalves) * 16;
      dw[g] = Q::load_f16(reinterpret_cast<const uint16_t*>(s));
      if constexpr (Fmt::kMin) mw[g] = Q::load_f16(reinterpret_cast<const uint16_t*>(s + 64));
      if constexpr (Q::kRowsOuter)
        for (int t = 0; t < T; t++) {
          const I d = Q::template finish<Fmt>(dot[g][t], a[t][b]);
          const F scale = Q::mul(dw[g], Q::set1(a[t][b].d));
          facc[g][t] = Q::fmadd(Q::to_float(d), scale, facc[g][t]);
          if constexpr (Fmt::kMin) facc[g][t] = Q::fmadd(mw[g], Q::set1(a[t][b].s), facc[g][t]);
        }
    }
    if constexpr (!Q::kRowsOuter)
      for (int t = 0; t < T; t++) {
        const F da = Q::set1(a[t][b].d);
        for (int g = 0; g < G; g++) {
          facc[g][t] = Q::fmadd(Q::to_float(dot[g][t]), Q::mul(dw[g], da), facc[g][t]);
          if constexpr (Fmt::kMin) facc[g][t] = Q::fmadd(mw[g], Q::set1(a[t][b].s), facc[g][t]);
        }
      }
  }
  Q::template store<G, T>(facc, y, ldy, row0, row_end);
}

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The MatmulKernel of format Fmt on ISA Q: packed by quant_pack.h (Q8_0 stored q + 128 where
// Q::kQ8Biased), activations by quantize_act.h with Fmt's bias, computed by the ISA's driver.
template <class Q>
void pack(const WeightMatrix& w, PackedWeights& out) {
  q32_pack(w, out, Q::kQ8Biased);
}
template <class Q, class Fmt>
constexpr MatmulKernel kernel(const char* name, decltype(MatmulKernel::compute) compute) {
  return {name, Fmt::kType, Q::kIsa, kQ32GroupRows, pack<Q>, q32_act_row_bytes,
          quantize_act::q32<Q, Fmt::kActBias, Fmt::kMin>, compute};
}

}  // namespace
}  // namespace lumen::q32
