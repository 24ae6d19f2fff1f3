// Q8_K activation quantization for the AVX2 K-quant kernels: kernels/generic/quantize_q8k.h
// over avx2::Vf, with the sums AVX2's kernels read (ActCorr::Pairs16 corrections).
#include "kernels/avx2/matmul_q8k_avx2.h"
#include "kernels/generic/quantize_q8k.h"

namespace lumen::kquant {

namespace {

struct Sums {
  static void block(uint8_t* dst, int corr_mul) {
    // Group sums: vpsadbw sums 8 bytes as unsigned, so bias the signed bytes by 128 first.
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones8 = _mm256_set1_epi8(1);
    int16_t bs16[16];
    int16_t pairs[16][2];
    for (int j = 0; j < 8; j++) {
      const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(dst + kActQs + 32 * j));
      alignas(32) int64_t s[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(s),
                         _mm256_sad_epu8(_mm256_xor_si256(q8, bias), _mm256_setzero_si256()));
      bs16[2 * j] = static_cast<int16_t>(s[0] + s[1] - 16 * 128);
      bs16[2 * j + 1] = static_cast<int16_t>(s[2] + s[3] - 16 * 128);
      if (corr_mul != 0) {
        // vpmaddubsw pair sums per group (one group per 128-bit lane), summed over the 4 dwords.
        __m256i p = _mm256_maddubs_epi16(ones8, q8);
        p = _mm256_add_epi16(p, _mm256_shuffle_epi32(p, _MM_SHUFFLE(1, 0, 3, 2)));
        p = _mm256_add_epi16(p, _mm256_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1)));
        p = _mm256_mullo_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(corr_mul)));
        const int32_t lo = _mm256_extract_epi32(p, 0), hi = _mm256_extract_epi32(p, 4);
        std::memcpy(pairs[2 * j], &lo, 4);
        std::memcpy(pairs[2 * j + 1], &hi, 4);
      }
    }
    std::memcpy(dst + kActBsums16, bs16, sizeof(bs16));
    int16_t bs32[8];
    for (int s = 0; s < 8; s++) bs32[s] = static_cast<int16_t>(bs16[2 * s] + bs16[2 * s + 1]);
    std::memcpy(dst + kActBsums32, bs32, sizeof(bs32));
    if (corr_mul != 0) std::memcpy(dst + kActCorr, pairs, sizeof(pairs));
  }
};

}  // namespace

void convert_act_avx2(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
  quantize_q8k::row<lumen::avx2::Vf, Sums>(x, dst, n_in, corr_mul);
}

}  // namespace lumen::kquant
