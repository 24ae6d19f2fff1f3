// AVX-512 float-weight matmul kernels (see the header). Kept free of library inline code in
// the hot paths: anything instantiated here would carry AVX-512 into baseline callers.
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() and then warn about
// it once inlined; silence that here, before the headers are read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/avx512/matmul_float_avx512.h"

#include <immintrin.h>

#include <cstring>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace lumen {
namespace {

constexpr int kV = 4;              // ZMM vectors across a panel: 16 rows each
constexpr int64_t kNR = 16 * kV;   // rows per panel (the kernels' row_align)
constexpr int kT = 6;              // tokens per register tile: kT * kV = 24 accumulators
// Bytes of a panel's k-block in the blocked path: the block (256 KiB: 2048 k of F16) stays in
// L2 while every token tile of the share passes over it. F16 is widened in registers each time
// (vcvtph2ps runs beside the FMAs: measured as fast as widening once into an F32 buffer).
constexpr size_t kBlockBytes = 256 * 1024;
// Activation rows are padded by one cache line: rows 2^k bytes apart would all map to the same
// L1 sets, and a tile reads kT of them at once.
constexpr size_t kActPad = 64;

// The packed formats, per k-step of a panel: F32 and F16 hold one value of each of the 64
// rows; BF16 pairs hold two consecutive k of each row (vdpbf16ps's operand layout), so one
// "step" covers two k. Activations are 4 bytes per step in every case: an F32 value, or a pair
// of BF16 values.
enum class Src { F32, F16, Bf16Pairs };

using F32Alias = float __attribute__((may_alias));
using U32Alias = uint32_t __attribute__((may_alias));

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

template <Src S>
constexpr size_t step_bytes() {  // bytes of one k-step of a whole panel
  return S == Src::F16 ? kNR * 2 : kNR * 4;
}

template <Src S>
int64_t n_steps(int64_t n_in) {
  return S == Src::Bf16Pairs ? (n_in + 1) / 2 : n_in;
}

// ---- packing (once, at load) ------------------------------------------------------------

// F32 / F16: panel p, step k, row r -> element (p * K + k) * kNR + r. Tail rows stay zero.
template <typename T>
void pack_kmajor(const WeightMatrix& w, PackedWeights& out) {
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

void pack_f32(const WeightMatrix& w, PackedWeights& out) { pack_kmajor<float>(w, out); }
void pack_f16(const WeightMatrix& w, PackedWeights& out) { pack_kmajor<uint16_t>(w, out); }

// BF16: panel p, pair j, row r, half h -> element ((p * K2 + j) * kNR + r) * 2 + h; an odd
// n_in leaves the last pair's second half zero (the activations pad it with zero too).
// to_bf16_bits maps a stored 16-bit value to the BF16 bits to pack.
template <uint16_t (*to_bf16_bits)(uint16_t)>
void pack_bf16_pairs(const WeightMatrix& w, PackedWeights& out) {
  const int64_t K = w.n_in, K2 = (K + 1) / 2, n_panels = (w.n_out + kNR - 1) / kNR;
  auto* dst = reinterpret_cast<uint16_t*>(out.allocate(2 * static_cast<size_t>(n_panels * kNR * K2 * 2)));
  for (int64_t p = 0; p < n_panels; p++) {
    uint16_t* pd = dst + p * kNR * K2 * 2;
    const int64_t rows = min64(kNR, w.n_out - p * kNR);
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
      const int64_t k1 = min64(K, k0 + 64);
      for (int64_t r = 0; r < rows; r++) {
        const auto* src = reinterpret_cast<const uint16_t*>(w.data + static_cast<size_t>(p * kNR + r) * w.row_bytes);
        for (int64_t k = k0; k < k1; k++) pd[((k >> 1) * kNR + r) * 2 + (k & 1)] = to_bf16_bits(src[k]);
      }
    }
  }
}

uint16_t bf16_as_is(uint16_t b) { return b; }
// F16 computed as BF16 (the opt-in kMatmulF16AsBf16Avx512): the nearest BF16 of its exact F32 value.
uint16_t f16_to_bf16(uint16_t h) { return fp32_to_bf16(fp16_to_fp32(h)); }

void pack_bf16(const WeightMatrix& w, PackedWeights& out) { pack_bf16_pairs<bf16_as_is>(w, out); }
void pack_f16_as_bf16(const WeightMatrix& w, PackedWeights& out) { pack_bf16_pairs<f16_to_bf16>(w, out); }

// ---- activations ------------------------------------------------------------------------

size_t act_bytes_f32(int64_t n_in) { return static_cast<size_t>(n_in) * 4 + kActPad; }
size_t act_bytes_bf16(int64_t n_in) { return static_cast<size_t>((n_in + 1) / 2) * 4 + kActPad; }

void convert_f32(const float* x, uint8_t* dst, int64_t n) { std::memcpy(dst, x, static_cast<size_t>(n) * 4); }

// x rounded to F16 (round to nearest even, as the reference) and widened back to F32: the
// weights' products with it are then exact in F32.
void convert_f16(const float* x, uint8_t* dst, int64_t n) {
  auto* out = reinterpret_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
  }
}

// Round to nearest even in integer arithmetic, bit for bit the reference fp32_to_bf16
// (vcvtneps2bf16 would flush subnormals to zero). NaNs become quiet NaNs.
inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

void convert_bf16(const float* x, uint8_t* dst, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(out + i, m, to_bf16(_mm512_maskz_loadu_ps(m, x + i)));
  }
  if (n & 1) out[n] = 0;  // the odd tail's partner in the last pair
}

// ---- the register tile --------------------------------------------------------------------

// NT tokens x 64 rows, over kn k-steps of the panel at wp. Accumulators start at zero (first)
// or at the partial sums already in y; the last panel's rows beyond n_out are masked off.
template <Src S, int NT>
void tile(const uint8_t* wp, int64_t kn, const uint8_t* a, size_t as, float* y, int64_t ldy, bool first,
          const __mmask16* m) {
  __m512 acc[NT][kV];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
    for (int v = 0; v < kV; v++)
      acc[t][v] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m[v], y + t * ldy + 16 * v);
  for (int64_t k = 0; k < kn; k++) {
    if constexpr (S == Src::Bf16Pairs) {
      const auto* w = reinterpret_cast<const __m512i*>(wp) + k * kV;
      __m512i wv[kV];
#pragma GCC unroll 4
      for (int v = 0; v < kV; v++) wv[v] = _mm512_load_si512(w + v);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) {
        const __m512i b = _mm512_set1_epi32(*reinterpret_cast<const U32Alias*>(a + t * as + 4 * k));
#pragma GCC unroll 4
        for (int v = 0; v < kV; v++) acc[t][v] = _mm512_dpbf16_ps(acc[t][v], (__m512bh)wv[v], (__m512bh)b);
      }
    } else {
      __m512 wv[kV];
      if constexpr (S == Src::F16) {
        const auto* w = reinterpret_cast<const __m256i*>(wp) + k * kV;
#pragma GCC unroll 4
        for (int v = 0; v < kV; v++) wv[v] = _mm512_cvtph_ps(_mm256_load_si256(w + v));
      } else {
        const auto* w = reinterpret_cast<const float*>(wp) + k * kNR;
#pragma GCC unroll 4
        for (int v = 0; v < kV; v++) wv[v] = _mm512_load_ps(w + 16 * v);
      }
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) {
        const __m512 b = _mm512_set1_ps(*reinterpret_cast<const F32Alias*>(a + t * as + 4 * k));
#pragma GCC unroll 4
        for (int v = 0; v < kV; v++) acc[t][v] = _mm512_fmadd_ps(wv[v], b, acc[t][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
    for (int v = 0; v < kV; v++) _mm512_mask_storeu_ps(y + t * ldy + 16 * v, m[v], acc[t][v]);
}

// Dispatches nt (1..kT) tokens to the tile instantiated for exactly that many.
template <Src S, int NT = kT>
void tile_n(int nt, const uint8_t* wp, int64_t kn, const uint8_t* a, size_t as, float* y, int64_t ldy, bool first,
            const __mmask16* m) {
  if constexpr (NT > 1) {
    if (nt < NT) return tile_n<S, NT - 1>(nt, wp, kn, a, as, y, ldy, first, m);
  }
  tile<S, NT>(wp, kn, a, as, y, ldy, first, m);
}

void panel_masks(int64_t p, int64_t r1, __mmask16* m) {
  const int64_t valid = min64(kNR, r1 - p * kNR);
  for (int v = 0; v < kV; v++) {
    const int64_t c = valid - 16 * v;
    m[v] = c >= 16 ? static_cast<__mmask16>(0xffff) : c <= 0 ? 0 : static_cast<__mmask16>((1u << c) - 1);
  }
}

template <Src S>
void compute(const WeightMatrix& w, const uint8_t* act, size_t as, int64_t n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1) {
  const int64_t K = n_steps<S>(w.n_in);
  const uint8_t* packed = w.packed->data;
  const size_t panel_bytes = static_cast<size_t>(K) * step_bytes<S>();
  const int64_t p0 = r0 / kNR, p1 = (r1 + kNR - 1) / kNR;
  __mmask16 m[kV];
  // One tile of tokens: the panel's whole k range with the accumulators in registers. More:
  // k-blocks of each panel stay in L2 while every token tile passes over them, accumulating
  // into y (the same per-lane summation order, so results do not depend on the batch).
  const int64_t kb_steps = n_tokens <= kT ? K : static_cast<int64_t>(kBlockBytes / step_bytes<S>());
  for (int64_t kb = 0; kb < K; kb += kb_steps) {
    const int64_t kn = min64(kb_steps, K - kb);
    for (int64_t p = p0; p < p1; p++) {
      panel_masks(p, r1, m);
      const uint8_t* wp = packed + static_cast<size_t>(p) * panel_bytes + static_cast<size_t>(kb) * step_bytes<S>();
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kT)
        tile_n<S>(static_cast<int>(min64(kT, n_tokens - t0)), wp, kn, act + t0 * as + kb * 4, as,
                  y + t0 * ldy + p * kNR, ldy, kb == 0, m);
    }
  }
}

}  // namespace

const MatmulKernel kMatmulF16Avx512 = {"f16/avx512", GgmlType::F16, Isa::Avx512, kNR,
                                       pack_f16, act_bytes_f32, convert_f16, compute<Src::F16>};
const MatmulKernel kMatmulBf16Avx512 = {"bf16/avx512-bf16", GgmlType::BF16, Isa::Avx512, kNR,
                                        pack_bf16, act_bytes_bf16, convert_bf16, compute<Src::Bf16Pairs>};
const MatmulKernel kMatmulF16AsBf16Avx512 = {"f16-as-bf16/avx512-bf16", GgmlType::F16, Isa::Avx512, kNR,
                                             pack_f16_as_bf16, act_bytes_bf16, convert_bf16,
                                             compute<Src::Bf16Pairs>};
const MatmulKernel kMatmulF32Avx512 = {"f32/avx512", GgmlType::F32, Isa::Avx512, kNR,
                                       pack_f32, act_bytes_f32, convert_f32, compute<Src::F32>};

}  // namespace lumen
