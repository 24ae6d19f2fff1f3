// Q8_K activation quantization for the AVX-512 K-quant kernels: kernels/generic/quantize_q8k.h
// over avx512::Vf, with the sums AVX-512's kernels read (ActCorr::Int32 corrections).
#include "kernels/avx512/matmul_q8k_avx512.h"
#include "kernels/generic/quantize_q8k.h"

namespace lumen::kquant {

namespace {

struct Sums {
  static void block(uint8_t* dst, int corr_mul) {
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
    if (corr_mul != 0) {
      const __m512i bs = _mm512_cvtepi16_epi32(_mm256_set_m128i(bs_hi, bs_lo));
      _mm512_storeu_si512(dst + kActCorr, _mm512_mullo_epi32(bs, _mm512_set1_epi32(corr_mul)));
    }
  }
};

}  // namespace

void convert_act_avx512(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
  quantize_q8k::row<lumen::avx512::Vf, Sums>(x, dst, n_in, corr_mul);
}

}  // namespace lumen::kquant
