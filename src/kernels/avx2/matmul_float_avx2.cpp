// AVX2 float-weight matmul kernels (see the header). Kept free of library inline code in the
// hot paths: anything instantiated here would carry AVX2 into baseline callers.
#include "kernels/avx2/matmul_float_avx2.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/matmul.h"

namespace lumen {
namespace {

constexpr int kV = 4;             // YMM vectors across a panel: 8 rows each
constexpr int64_t kNR = 8 * kV;   // rows per panel (the kernels' row_align)
constexpr int kT = 3;             // tokens per register tile: 12 accumulators of 16 YMM
constexpr int64_t kKB = 256;      // k-steps per block of the blocked path: 32 rows x 256 x 4 B = 32 KiB
// From this many tokens on, a half-precision panel's k-block is widened to F32 once and
// reused by every token tile; below it the weights are widened in registers while streaming.
constexpr int64_t kConvertMinTokens = 6;

enum class Src { F32, F16, Bf16 };

using F32Alias = float __attribute__((may_alias));

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

template <Src S>
constexpr size_t step_bytes() {  // bytes of one k-step of a whole panel
  return S == Src::F32 ? kNR * 4 : kNR * 2;
}

// ---- packing (once, at load): panel p, step k, row r -> element (p * K + k) * kNR + r ----

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
void pack_half(const WeightMatrix& w, PackedWeights& out) { pack_kmajor<uint16_t>(w, out); }

// ---- activations: F32 rows (rounded through F16 or BF16 where the weights are) -----------

size_t act_bytes(int64_t n_in) { return static_cast<size_t>(n_in) * 4; }

void convert_f32(const float* x, uint8_t* dst, int64_t n) { std::memcpy(dst, x, static_cast<size_t>(n) * 4); }

inline __m256 round_f16(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Round to nearest even in integer arithmetic, bit for bit the reference fp32_to_bf16, and
// widen back (the low 16 bits cleared). NaNs become quiet NaNs.
inline __m256 round_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
  // |u| > inf as signed compare works: both sides are non-negative.
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(64 << 16));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

template <__m256 (*Round)(__m256)>
void convert_rounded(const float* x, uint8_t* dst, int64_t n) {
  auto* out = reinterpret_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, Round(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float tmp[8] = {};
    std::memcpy(tmp, x + i, static_cast<size_t>(n - i) * 4);
    _mm256_store_ps(tmp, Round(_mm256_load_ps(tmp)));
    std::memcpy(out + i, tmp, static_cast<size_t>(n - i) * 4);
  }
}

// ---- the register tile --------------------------------------------------------------------

template <Src S>
inline __m256 load_w(const uint8_t* wp, int64_t k, int v) {
  if constexpr (S == Src::F32) {
    return _mm256_load_ps(reinterpret_cast<const float*>(wp) + k * kNR + 8 * v);
  } else {
    const __m128i h = _mm_load_si128(reinterpret_cast<const __m128i*>(wp) + k * kV + v);
    if constexpr (S == Src::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// NT tokens x 32 rows, over kn k-steps of the panel at wp; y rows of the tile are complete
// (the caller stages a partial last panel through a local buffer).
template <Src S, int NT>
void tile(const uint8_t* wp, int64_t kn, const uint8_t* a, size_t as, float* y, int64_t ldy, bool first) {
  __m256 acc[NT][kV];
#pragma GCC unroll 4
  for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
    for (int v = 0; v < kV; v++) acc[t][v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ldy + 8 * v);
  for (int64_t k = 0; k < kn; k++) {
    __m256 b[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) b[t] = _mm256_broadcast_ss(reinterpret_cast<const F32Alias*>(a + t * as + 4 * k));
#pragma GCC unroll 4
    for (int v = 0; v < kV; v++) {
      const __m256 w = load_w<S>(wp, k, v);
#pragma GCC unroll 4
      for (int t = 0; t < NT; t++) acc[t][v] = _mm256_fmadd_ps(w, b[t], acc[t][v]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
    for (int v = 0; v < kV; v++) _mm256_storeu_ps(y + t * ldy + 8 * v, acc[t][v]);
}

// Any number of tokens (<= kT) and rows: a partial last panel goes through a local buffer so
// the tile never touches y beyond row r1.
template <Src S>
void tile_n(int nt, int64_t valid, const uint8_t* wp, int64_t kn, const uint8_t* a, size_t as, float* y, int64_t ldy,
            bool first) {
  alignas(32) float stage[kT * kNR];
  float* yt = y;
  int64_t ld = ldy;
  if (valid < kNR) {
    for (int t = 0; t < nt; t++)
      for (int64_t r = 0; r < kNR; r++) stage[t * kNR + r] = (!first && r < valid) ? y[t * ldy + r] : 0.0f;
    yt = stage;
    ld = kNR;
  }
  switch (nt) {
    case 1: tile<S, 1>(wp, kn, a, as, yt, ld, first); break;
    case 2: tile<S, 2>(wp, kn, a, as, yt, ld, first); break;
    default: tile<S, kT>(wp, kn, a, as, yt, ld, first); break;
  }
  if (valid < kNR)
    for (int t = 0; t < nt; t++)
      for (int64_t r = 0; r < valid; r++) y[t * ldy + r] = stage[t * kNR + r];
}

template <Src S>
void widen_panel(const uint8_t* wp, int64_t kn, float* dst) {
  for (int64_t k = 0; k < kn; k++)
    for (int v = 0; v < kV; v++) _mm256_store_ps(dst + k * kNR + 8 * v, load_w<S>(wp, k, v));
}

template <Src S>
void compute(const WeightMatrix& w, const uint8_t* act, size_t as, int64_t n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1) {
  const int64_t K = w.n_in;
  const uint8_t* packed = w.packed->data;
  const size_t panel_bytes = static_cast<size_t>(K) * step_bytes<S>();
  const int64_t p0 = r0 / kNR, p1 = (r1 + kNR - 1) / kNR;
  const bool streaming = n_tokens <= kT || (S != Src::F32 && n_tokens < kConvertMinTokens);
  if (streaming) {
    for (int64_t p = p0; p < p1; p++) {
      const uint8_t* wp = packed + static_cast<size_t>(p) * panel_bytes;
      const int64_t valid = min64(kNR, r1 - p * kNR);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kT)
        tile_n<S>(static_cast<int>(min64(kT, n_tokens - t0)), valid, wp, K, act + t0 * as, as, y + t0 * ldy + p * kNR,
                  ldy, true);
    }
    return;
  }
  alignas(32) float buf[kKB * kNR];
  for (int64_t kb = 0; kb < K; kb += kKB) {
    const int64_t kn = min64(kKB, K - kb);
    for (int64_t p = p0; p < p1; p++) {
      const int64_t valid = min64(kNR, r1 - p * kNR);
      const uint8_t* wp = packed + static_cast<size_t>(p) * panel_bytes + static_cast<size_t>(kb) * step_bytes<S>();
      if constexpr (S != Src::F32) {
        widen_panel<S>(wp, kn, buf);
        wp = reinterpret_cast<const uint8_t*>(buf);
      }
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kT)
        tile_n<Src::F32>(static_cast<int>(min64(kT, n_tokens - t0)), valid, wp, kn, act + t0 * as + kb * 4, as,
                         y + t0 * ldy + p * kNR, ldy, kb == 0);
    }
  }
}

}  // namespace

const MatmulKernel kMatmulF16Avx2 = {"f16/avx2", GgmlType::F16, Isa::Avx2, kNR,
                                     pack_half, act_bytes, convert_rounded<round_f16>, compute<Src::F16>};
const MatmulKernel kMatmulBf16Avx2 = {"bf16/avx2", GgmlType::BF16, Isa::Avx2, kNR,
                                      pack_half, act_bytes, convert_rounded<round_bf16>, compute<Src::Bf16>};
const MatmulKernel kMatmulF32Avx2 = {"f32/avx2", GgmlType::F32, Isa::Avx2, kNR,
                                     pack_f32, act_bytes, convert_f32, compute<Src::F32>};

}  // namespace lumen
