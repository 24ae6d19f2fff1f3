// Q3_K x Q8_K matmul, AVX-512 VNNI. Weights are repacked into 16-row groups (kquant_pack.h):
// a 64-byte qs load holds the 2-bit low parts of 4 consecutive elements of 4 slices (32
// elements each) for 16 rows, an hmask load their high bits, and the scales come unpacked to
// signed int8 per group of 16. The values v = low | high << 2 (0..7) are u8 for vpdpbusd; the
// format's offset (q = v - 4) is applied exactly by starting each group's int32 accumulator at
// -4 * bsum16 (ActCorr::Int32), then isum += scale * acc, and per block
// y += (d * da) * isum, the reference's float evaluation order.
// A tile is 16 rows x T (1..4) tokens; every weight vector feeds T tokens.
#include "kernels/avx512/matmul_q3k_avx512.h"

#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/matmul.h"

namespace lumen {

namespace {

using namespace kquant;
using namespace kquant::avx512;

constexpr int kRows = 16;
constexpr size_t kMain = 96 * kRows;  // qs 64R then hmask 32R
constexpr size_t kHm = 64 * kRows;
constexpr size_t kMeta = 18 * kRows;  // int8 scales [g][r], fp16 d[r]
constexpr size_t kBB = kActBlockBytesCorr;

// Bit kBit of each hmask byte moved to bit 2 (other bits are masked off by the caller).
template <int kBit>
LUMEN_KQ_INLINE __m512i high_bit_to_2(__m512i hm) {
  if constexpr (kBit < 2)
    return _mm512_slli_epi16(hm, 2 - kBit);
  else if constexpr (kBit > 2)
    return _mm512_srli_epi16(hm, kBit - 2);
  else
    return hm;
}

template <int kShift>
LUMEN_KQ_INLINE __m512i srl16(__m512i v) {
  if constexpr (kShift == 0)
    return v;
  else
    return _mm512_srli_epi16(v, kShift);
}

// Slices J and J+1 (elements 128H + 32J + 16kh .. +15 and the same 32 further: groups
// g_a = 8H + 2J + kh and g_a + 2).
template <int T, int H, int J>
LUMEN_KQ_INLINE void slice_pair(const uint8_t* q, const uint8_t* m, const uint8_t* const a[T], int kh,
                                __m512i isum[T]) {
  const __m512i m03 = _mm512_set1_epi8(0x03), m04 = _mm512_set1_epi8(0x04);
  const int ga = 8 * H + 2 * J + kh, gb = ga + 2;
  __m512i acc_a[T], acc_b[T];
  for (int t = 0; t < T; t++) {
    acc_a[t] = bcast32(a[t] + kActCorr + 4 * ga);
    acc_b[t] = bcast32(a[t] + kActCorr + 4 * gb);
  }
  for (int kk = 0; kk < 4; kk++) {
    const int k = 4 * kh + kk;
    const __m512i x = _mm512_loadu_si512(q + 64 * (H * 8 + k));
    const __m512i hm = _mm512_loadu_si512(q + kHm + 64 * k);
    // A | (B & C): the 2 low bits, plus the high bit masked to bit 2.
    const __m512i wa = _mm512_ternarylogic_epi32(_mm512_and_si512(srl16<2 * J>(x), m03),
                                                 high_bit_to_2<4 * H + J>(hm), m04, 0xF8);
    const __m512i wb = _mm512_ternarylogic_epi32(_mm512_and_si512(srl16<2 * J + 2>(x), m03),
                                                 high_bit_to_2<4 * H + J + 1>(hm), m04, 0xF8);
    const int e = 128 * H + 32 * J + 4 * k;
    for (int t = 0; t < T; t++) {
      acc_a[t] = _mm512_dpbusd_epi32(acc_a[t], wa, bcast32(a[t] + e));
      acc_b[t] = _mm512_dpbusd_epi32(acc_b[t], wb, bcast32(a[t] + e + 32));
    }
  }
  const __m512i sa = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * ga)));
  const __m512i sb = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * gb)));
  for (int t = 0; t < T; t++)
    isum[t] = _mm512_add_epi32(
        isum[t], _mm512_add_epi32(_mm512_mullo_epi32(acc_a[t], sa), _mm512_mullo_epi32(acc_b[t], sb)));
}

template <int T>
void tile(const uint8_t* main, const uint8_t* meta, int64_t nb, const uint8_t* act, size_t stride, float* y,
          int64_t ldy, int n_rows) {
  __m512 acc[T];
  for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* q = main + kMain * static_cast<size_t>(b);
    const uint8_t* m = meta + kMeta * static_cast<size_t>(b);
    prefetch(q + kMain * kPrefetchBlocks, kMain);
    prefetch(m + kMeta * kPrefetchBlocks, kMeta);
    const uint8_t* a[T];
    for (int t = 0; t < T; t++) a[t] = act + stride * t + kBB * static_cast<size_t>(b);
    __m512i isum[T];
    for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
    for (int kh = 0; kh < 2; kh++) {
      slice_pair<T, 0, 0>(q, m, a, kh, isum);
      slice_pair<T, 0, 2>(q, m, a, kh, isum);
      slice_pair<T, 1, 0>(q, m, a, kh, isum);
      slice_pair<T, 1, 2>(q, m, a, kh, isum);
    }
    const __m512 d = load_f16x16(m + 16 * kRows);
    for (int t = 0; t < T; t++)
      acc[t] = _mm512_add_ps(
          acc[t], mul_rounded(_mm512_mul_ps(d, bcast_f32(a[t] + kActD)), _mm512_cvtepi32_ps(isum[t])));
  }
  const __mmask16 mask = row_mask(n_rows);
  for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + ldy * t, mask, acc[t]);
}

void compute(const WeightMatrix& w, const uint8_t* act, size_t stride, int64_t n_tokens, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t nb = w.n_in / kBlock;
  const size_t gbytes = (static_cast<size_t>(nb) * (kMain + kMeta) + 63) / 64 * 64;
  const uint8_t* base = w.packed.get()->data;
  for_tiles(r0, r1, n_tokens, gbytes, [&]<int T>(int64_t g, int64_t t) {
    const uint8_t* main = base + gbytes * static_cast<size_t>(g);
    const uint8_t* meta = main + kMain * static_cast<size_t>(nb);
    const int64_t left = r1 - g * kRows;
    const int n_rows = left < kRows ? static_cast<int>(left) : kRows;
    tile<T>(main, meta, nb, act + stride * t, stride, y + g * kRows + ldy * t, ldy, n_rows);
  });
}

void convert(const float* x, uint8_t* dst, int64_t n_in) { convert_act_avx512(x, dst, n_in, -4); }

}  // namespace

const MatmulKernel kMatmulQ3_KAvx512 = {
    "q3_K/avx512-vnni",         GgmlType::Q3_K, Isa::Avx512, kRows, kquant::pack_kquant_r16,
    kquant::act_row_bytes_corr, convert,        compute};

}  // namespace lumen
