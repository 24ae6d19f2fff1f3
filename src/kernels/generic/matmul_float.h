// Float-weight matmul (F32, F16, BF16) written once over an ISA's float-matmul traits V (the
// SIMD layer Vf plus the tile shape: avx2::FloatMm, avx512::FloatMm) and instantiated by that
// ISA's translation unit. Weights are repacked into panels of kNR = kV vectors of rows (4; 1
// for the narrow F32 kernel) stored k-major (for each k, the panel's rows side by side), so one
// vector load holds kLanes rows at one k and a register tile of kNR rows x kTokens tokens reuses
// every weight vector kTokens times. The same tile serves decode and prefill with the same
// per-lane summation order, so a (row, token) result does not depend on the batch it was
// computed in.
// One token tile: the panel's whole k range with the accumulators in registers. More: k-blocks
// of each panel (V::kBlockBytes) stay in cache while every token tile passes over them,
// accumulating into y. Half-precision weights are widened in registers as they are loaded, or
// (where V::kWidenMinTokens > 0, from that many tokens) once per k-block into an F32 buffer.
//
// Internal linkage (an unnamed namespace): each ISA's copy stays in its own translation unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul.h"

namespace lumen::float_mm {
namespace {

// The packed formats, per k-step of a panel: F32, F16 and BF16 hold one value of each row;
// Bf16Pairs (V's own dot product, V::bf16_pairs_step) two consecutive k of each row, so one
// step covers two k. Activations are 4 bytes per step: an F32 value, or a pair of BF16 values.
enum class Src { F32, F16, Bf16, Bf16Pairs };

// Activation rows are padded by one cache line: rows 2^k bytes apart would all map to the same
// L1 sets, and a tile reads kTokens of them at once.
constexpr size_t kActPad = 64;

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// kVecs vectors across a panel: 4 for every matrix but the narrow F32 kernel's 1, whose panels
// of one vector's rows let a matrix of a few dozen rows (a mixture's router: 32) be shared out
// among the threads and streamed without padding. A row's sum is the same sequence of FMAs at
// any panel width.
template <class V, int kVecs = 4>
struct Kernels {
  using F = typename V::F;
  using M = typename V::M;
  static constexpr int kV = kVecs;
  static constexpr int64_t kNR = int64_t{V::kLanes} * kV;  // rows per panel (the row_align)
  static constexpr int kT = V::kTokens;
  static constexpr size_t kWidenFloats = V::kWidenMinTokens > 0 ? V::kBlockBytes / 4 : 1;

  template <Src S>
  static constexpr size_t step_bytes() {  // bytes of one k-step of a whole panel
    return S == Src::F16 || S == Src::Bf16 ? kNR * 2 : kNR * 4;
  }
  template <Src S>
  static int64_t n_steps(int64_t n_in) {
    return S == Src::Bf16Pairs ? (n_in + 1) / 2 : n_in;
  }

  // ---- packing (once, at load): panel p, step k, row r -> element (p * K + k) * kNR + r ----
  template <typename T>
  static void pack_kmajor(const WeightMatrix& w, PackedWeights& out) {
    const int64_t K = w.n_in, n_panels = (w.n_out + kNR - 1) / kNR;
    T* dst = reinterpret_cast<T*>(out.allocate(sizeof(T) * static_cast<size_t>(n_panels * kNR * K)));
    for (int64_t p = 0; p < n_panels; p++) {
      T* pd = dst + p * kNR * K;
      const int64_t rows = min64(kNR, w.n_out - p * kNR);
      for (int64_t k0 = 0; k0 < K; k0 += 64) {  // blocked transpose: the written lines stay in L1
        const int64_t k1 = min64(K, k0 + 64);
        for (int64_t r = 0; r < rows; r++) {
          const T* src = reinterpret_cast<const T*>(w.data + static_cast<size_t>(p * kNR + r) * w.row_bytes);
          for (int64_t k = k0; k < k1; k++) pd[k * kNR + r] = src[k];
        }
      }
    }
  }
  static void pack_f32(const WeightMatrix& w, PackedWeights& out) { pack_kmajor<float>(w, out); }
  static void pack_half(const WeightMatrix& w, PackedWeights& out) { pack_kmajor<uint16_t>(w, out); }

  // ---- activations: F32 rows, rounded through F16 or BF16 where the weights are ----
  static size_t act_bytes(int64_t n_in) { return static_cast<size_t>(n_in) * 4 + kActPad; }
  static void convert_f32(const float* x, uint8_t* dst, int64_t n) { std::memcpy(dst, x, static_cast<size_t>(n) * 4); }
  template <F (*Round)(F)>
  static void convert_rounded(const float* x, uint8_t* dst, int64_t n) {
    auto* out = reinterpret_cast<float*>(dst);
    int64_t i = 0;
    for (; i + V::kLanes <= n; i += V::kLanes) V::storeu(out + i, Round(V::loadu(x + i)));
    if (i < n) {
      const M m = V::mask(n - i);
      V::store_m(out + i, m, Round(V::load_m(m, x + i)));
    }
  }

  // ---- the register tile ----
  template <Src S>
  static inline __attribute__((always_inline)) F load_w(const uint8_t* wp, int64_t k, int v) {
    if constexpr (S == Src::F32) return V::load(reinterpret_cast<const float*>(wp) + k * kNR + V::kLanes * v);
    else if constexpr (S == Src::F16) return V::load_f16(reinterpret_cast<const uint16_t*>(wp) + k * kNR + V::kLanes * v);
    else return V::load_bf16(reinterpret_cast<const uint16_t*>(wp) + k * kNR + V::kLanes * v);
  }

  // NT tokens x kNR rows, over kn k-steps of the panel at wp. Accumulators start at zero
  // (first) or at the partial sums already in y; rows beyond the matrix are masked off (m, null
  // for a whole panel: AVX2's masked loads and stores cost more than plain ones).
  template <Src S, int NT>
  static void tile(const uint8_t* wp, int64_t kn, const uint8_t* a, size_t as, float* y, int64_t ldy, bool first,
                   const M* m) {
    F acc[NT][kV];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
      for (int v = 0; v < kV; v++)
        acc[t][v] = first ? V::zero() : m ? V::load_m(m[v], y + t * ldy + V::kLanes * v) : V::loadu(y + t * ldy + V::kLanes * v);
    for (int64_t k = 0; k < kn; k++) {
      if constexpr (S == Src::Bf16Pairs) {
        V::template bf16_pairs_step<NT, kV>(wp, k, a, as, acc);
      } else {
        // The NT broadcasts first, then one weight vector at a time: NT * kV accumulators +
        // NT + 1 registers, which is what fits AVX2's 16 (loading all kV weight vectors first
        // would need NT * kV + kV + 1 and spill).
        F b[NT];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) b[t] = V::bcast(reinterpret_cast<const float*>(a + t * as + 4 * k));
#pragma GCC unroll 4
        for (int v = 0; v < kV; v++) {
          const F wv = load_w<S>(wp, k, v);
#pragma GCC unroll 8
          for (int t = 0; t < NT; t++) acc[t][v] = V::fmadd(wv, b[t], acc[t][v]);
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
      for (int v = 0; v < kV; v++) {
        if (m) V::store_m(y + t * ldy + V::kLanes * v, m[v], acc[t][v]);
        else V::storeu(y + t * ldy + V::kLanes * v, acc[t][v]);
      }
  }

  // Dispatches nt (1..kT) tokens to the tile instantiated for exactly that many.
  template <Src S, int NT = kT>
  static void tile_n(int nt, const uint8_t* wp, int64_t kn, const uint8_t* a, size_t as, float* y, int64_t ldy,
                     bool first, const M* m) {
    if constexpr (NT > 1) {
      if (nt < NT) return tile_n<S, NT - 1>(nt, wp, kn, a, as, y, ldy, first, m);
    }
    tile<S, NT>(wp, kn, a, as, y, ldy, first, m);
  }

  // The row masks of panel p, or null where all its kNR rows are below r1.
  static const M* panel_masks(int64_t p, int64_t r1, M* m) {
    const int64_t valid = min64(kNR, r1 - p * kNR);
    if (valid == kNR) return nullptr;
    for (int v = 0; v < kV; v++) m[v] = V::mask(valid - V::kLanes * v > 0 ? valid - V::kLanes * v : 0);
    return m;
  }

  template <Src S>
  static void widen_panel(const uint8_t* wp, int64_t kn, float* dst) {
    for (int64_t k = 0; k < kn; k++)
      for (int v = 0; v < kV; v++) V::store(dst + k * kNR + V::kLanes * v, load_w<S>(wp, k, v));
  }

  template <Src S>
  static void compute(const WeightMatrix& w, const uint8_t* act, size_t as, int64_t n_tokens, float* y, int64_t ldy,
                      int64_t r0, int64_t r1) {
    constexpr bool kHalf = S == Src::F16 || S == Src::Bf16;
    const int64_t K = n_steps<S>(w.n_in);
    const uint8_t* packed = w.packed->data;
    const size_t panel_bytes = static_cast<size_t>(K) * step_bytes<S>();
    const int64_t p0 = r0 / kNR, p1 = (r1 + kNR - 1) / kNR;
    const bool whole = n_tokens <= kT || (kHalf && n_tokens < V::kWidenMinTokens);
    const bool widen = kHalf && V::kWidenMinTokens > 0 && !whole;
    const int64_t kb_steps =
        whole ? K : static_cast<int64_t>(V::kBlockBytes / (widen ? kNR * 4 : step_bytes<S>()));
    alignas(64) float buf[kWidenFloats];  // the widened k-block (where V widens)
    M masks[kV];
    for (int64_t kb = 0; kb < K; kb += kb_steps) {
      const int64_t kn = min64(kb_steps, K - kb);
      for (int64_t p = p0; p < p1; p++) {
        const M* m = panel_masks(p, r1, masks);
        const uint8_t* wp = packed + static_cast<size_t>(p) * panel_bytes + static_cast<size_t>(kb) * step_bytes<S>();
        const uint8_t* a = act + kb * 4;
        float* yp = y + p * kNR;
        if constexpr (kHalf && V::kWidenMinTokens > 0) {
          if (widen) {
            widen_panel<S>(wp, kn, buf);
            for (int64_t t0 = 0; t0 < n_tokens; t0 += kT)
              tile_n<Src::F32>(static_cast<int>(min64(kT, n_tokens - t0)), reinterpret_cast<const uint8_t*>(buf), kn,
                               a + t0 * as, as, yp + t0 * ldy, ldy, kb == 0, m);
            continue;
          }
        }
        for (int64_t t0 = 0; t0 < n_tokens; t0 += kT)
          tile_n<S>(static_cast<int>(min64(kT, n_tokens - t0)), wp, kn, a + t0 * as, as, yp + t0 * ldy, ldy, kb == 0,
                    m);
      }
    }
  }
};

}  // namespace
}  // namespace lumen::float_mm
