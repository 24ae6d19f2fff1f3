// Vectorized Q8_K activation quantization for the AVX2 K-quant kernels. Every step repeats the
// reference's float operations (core/quant/quant_ref_kquants.cpp, from_float_q8_k) so the bytes
// are identical: amax ignores NaN like `fabs(x) > amax` does (vmaxps returns its second
// operand when either is NaN), the first element of largest magnitude supplies the sign,
// iscale = -127 / max, q = min(127, round_half_even(iscale * x)) (vminps also returns 127 for
// a NaN product, like std::min(127.0f, NaN)), d = 1 / iscale.
#include "kernels/avx2/matmul_q8k_avx2.h"

namespace lumen::kquant {

namespace {

void quantize_block(const float* x, uint8_t* dst, int corr_mul) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax_v = _mm256_setzero_ps();
  for (int j = 0; j < 32; j++)
    amax_v = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), amax_v);
  const float amax = lumen::avx2::Vf::hmax(amax_v);  // lanes are never NaN
  const size_t bb = corr_mul != 0 ? kActBlockBytesCorr : kActBlockBytes;
  if (!(amax > 0.0f)) {
    std::memset(dst, 0, bb);
    return;
  }
  const __m256 amax_b = _mm256_set1_ps(amax);
  int idx = 0;
  for (int j = 0; j < 32; j++) {
    const int eq = _mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), amax_b, _CMP_EQ_OQ));
    if (eq) {
      idx = 8 * j + __builtin_ctz(static_cast<unsigned>(eq));
      break;
    }
  }
  const float iscale = -127.0f / x[idx];
  const __m256 vis = _mm256_set1_ps(iscale);
  const __m256 c127 = _mm256_set1_ps(127.0f);
  const __m256i fix = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int j = 0; j < 8; j++) {
    __m256i q32[4];
    for (int i = 0; i < 4; i++) {
      __m256 r = _mm256_round_ps(_mm256_mul_ps(vis, _mm256_loadu_ps(x + 32 * j + 8 * i)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q32[i] = _mm256_cvttps_epi32(_mm256_min_ps(r, c127));
    }
    // packs work per 128-bit lane; the final permute restores element order.
    const __m256i q16a = _mm256_packs_epi32(q32[0], q32[1]), q16b = _mm256_packs_epi32(q32[2], q32[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), fix);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kActQs + 32 * j), q8);
  }
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
  const float d = 1.0f / iscale;
  std::memcpy(dst + kActD, &d, 4);
  std::memset(dst + kActD + 4, 0, kActBlockBytes - kActD - 4);
  if (corr_mul != 0) std::memcpy(dst + kActCorr, pairs, sizeof(pairs));
}

}  // namespace

void convert_act_avx2(const float* x, uint8_t* dst, int64_t n_in, int corr_mul) {
  const size_t bb = corr_mul != 0 ? kActBlockBytesCorr : kActBlockBytes;
  for (int64_t b = 0; b < n_in / kBlock; b++)
    quantize_block(x + b * kBlock, dst + static_cast<size_t>(b) * bb, corr_mul);
}

}  // namespace lumen::kquant
