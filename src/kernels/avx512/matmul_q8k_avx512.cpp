// Vectorized Q8_K activation quantization for the K-quant kernels. Every step repeats the
// reference's float operations (kernels/../core/quant/quant_ref_kquants.cpp, from_float_q8_k)
// so the bytes are identical: amax ignores NaN like `fabs(x) > amax` does (vmaxps returns its
// second operand when either is NaN), the first element of largest magnitude supplies the
// sign, iscale = -127 / max, q = min(127, round_half_even(iscale * x)) (vminps also returns
// 127 for a NaN product, like std::min(127.0f, NaN)), d = 1 / iscale.
#include "kernels/avx512/matmul_q8k_avx512.h"

namespace lumen::kquant {

namespace {

void quantize_block(const float* x, uint8_t* dst, int corr_mul) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 v[16];
  __m512 amax_v = _mm512_setzero_ps();
  for (int j = 0; j < 16; j++) {
    v[j] = _mm512_loadu_ps(x + 16 * j);
    amax_v = _mm512_max_ps(_mm512_andnot_ps(sign, v[j]), amax_v);
  }
  const float amax = lumen::avx512::Vf::hmax(amax_v);  // lanes are never NaN: no NaN ordering question here
  const size_t bb = corr_mul != 0 ? kActBlockBytesCorr : kActBlockBytes;
  if (!(amax > 0.0f)) {
    std::memset(dst, 0, bb);
    return;
  }
  const __m512 amax_b = _mm512_set1_ps(amax);
  int idx = 0;
  for (int j = 0; j < 16; j++) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, v[j]), amax_b, _CMP_EQ_OQ);
    if (eq) {
      idx = 16 * j + __builtin_ctz(eq);
      break;
    }
  }
  const float iscale = -127.0f / x[idx];
  const __m512 vis = _mm512_set1_ps(iscale);
  const __m512 c127 = _mm512_set1_ps(127.0f);
  for (int j = 0; j < 16; j++) {
    __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(vis, v[j]), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(r, c127);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kActQs + 16 * j),
                     _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
  }
  // Group sums: vpsadbw sums 8 bytes as unsigned, so bias the signed bytes by 128 first.
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m128i w[4];
  for (int i = 0; i < 4; i++) {
    const __m512i p = _mm512_loadu_si512(dst + kActQs + 64 * i);
    w[i] = _mm512_cvtepi64_epi16(_mm512_sad_epu8(_mm512_xor_si512(p, bias), _mm512_setzero_si512()));
  }
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i off = _mm256_set1_epi32(16 * 128);
  const __m128i bs_lo =
      _mm256_cvtepi32_epi16(_mm256_sub_epi32(_mm256_madd_epi16(_mm256_set_m128i(w[1], w[0]), ones16), off));
  const __m128i bs_hi =
      _mm256_cvtepi32_epi16(_mm256_sub_epi32(_mm256_madd_epi16(_mm256_set_m128i(w[3], w[2]), ones16), off));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kActBsums16), bs_lo);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kActBsums16 + 16), bs_hi);
  const __m128i ones8 = _mm_set1_epi16(1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kActBsums32),
                   _mm_packs_epi32(_mm_madd_epi16(bs_lo, ones8), _mm_madd_epi16(bs_hi, ones8)));
  const float d = 1.0f / iscale;
  std::memcpy(dst + kActD, &d, 4);
  std::memset(dst + kActD + 4, 0, kActBlockBytes - kActD - 4);
  if (corr_mul != 0) {
    const __m512i bs = _mm512_cvtepi16_epi32(_mm256_set_m128i(bs_hi, bs_lo));
    _mm512_storeu_si512(dst + kActCorr, _mm512_mullo_epi32(bs, _mm512_set1_epi32(corr_mul)));
  }
}

}  // namespace

void convert_act_avx512(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
  const size_t bb = corr_mul != 0 ? kActBlockBytesCorr : kActBlockBytes;
  for (int64_t b = 0; b < n_in / kBlock; b++)
    quantize_block(x + b * kBlock, dst + static_cast<size_t>(b) * bb, corr_mul);
}

}  // namespace lumen::kquant
