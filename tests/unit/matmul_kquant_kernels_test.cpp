// The per-ISA K-quant matmul kernels (Q2_K..Q6_K x Q8_K) against the scalar reference kernel,
// through the MatmulKernel interface: the activation conversion must be bit-identical to
// from_float_q8_k, and so must the outputs (same integer sums, same float order), over shapes
// with tails (one row, odd rows, rows not a multiple of the row group, one block, many blocks)
// and token counts around the kernels' token tiles, for every ISA this CPU runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant/quant_ref.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kquant_pack.h"
#include "kernels/matmul.h"
#include "kernels/ref/matmul_ref.h"
#include "test_support.h"

namespace lumen {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q3_K,
                               GgmlType::Q2_K};
constexpr Isa kIsas[] = {Isa::Avx2, Isa::Avx512};

// The registered (non-reference) kernel for (type, isa), or nullptr when the CPU cannot run
// `isa` or no kernel for exactly that ISA is registered.
const MatmulKernel* fast_kernel(GgmlType type, Isa isa) {
  if (!isa_supported(isa, cpu_features())) return nullptr;
  const MatmulKernel* k = find_matmul_kernel(type, isa);
  return k && k->isa == isa ? k : nullptr;
}

// The activation offset correction each kernel folds into its activation rows: none for
// formats with minimums, -offset for Q6_K/Q3_K, as int32 per group (VNNI kernels) or as int16
// lane pairs (AVX2 kernels).
struct Corr {
  kquant::ActCorr mode;
  int mul;
};
Corr corr_of(const MatmulKernel& k) {
  const int mul = k.weight_type == GgmlType::Q6_K ? -32 : k.weight_type == GgmlType::Q3_K ? -4 : 0;
  if (mul == 0) return {kquant::ActCorr::None, 0};
  return {k.isa == Isa::Avx512 ? kquant::ActCorr::Int32 : kquant::ActCorr::Pairs16, mul};
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Random weight rows. Half the small matrices come from the weight quantizer (realistic blocks),
// the others are random bytes with sane fp16 d/dmin, which reach every scale and quant extreme
// (and cost no quantizer time).
std::vector<uint8_t> random_weights(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  const size_t rb = row_size(type, n_in);
  std::vector<uint8_t> w(rb * static_cast<size_t>(n_out));
  if (seed % 2 == 0 && n_in * n_out <= 100000) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n_in * n_out), seed);
    FromFloatFn q = weight_quantizer(type);
    for (int64_t r = 0; r < n_out; r++) q(x.data() + r * n_in, w.data() + rb * static_cast<size_t>(r), n_in);
    return w;
  }
  std::mt19937 rng(seed);
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  const size_t ts = type_traits(type).type_size;
  // Offsets of the fp16 fields: d (and dmin) at the start for Q4_K/Q5_K, at the end otherwise.
  std::uniform_real_distribution<float> ud(-0.02f, 0.02f);
  for (size_t off = 0; off < w.size(); off += ts) {
    uint8_t* blk = w.data() + off;
    const uint16_t d = fp32_to_fp16(ud(rng)), dmin = fp32_to_fp16(ud(rng));
    switch (type) {
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        std::memcpy(blk, &d, 2);
        std::memcpy(blk + 2, &dmin, 2);
        break;
      case GgmlType::Q2_K:
        std::memcpy(blk + ts - 4, &d, 2);
        std::memcpy(blk + ts - 2, &dmin, 2);
        break;
      default:
        std::memcpy(blk + ts - 2, &d, 2);
        break;
    }
  }
  return w;
}

// Activations with the awkward blocks: all zero, exact rounding ties (iscale = 1), the largest
// magnitude present with both signs, tiny values.
std::vector<float> activations(int64_t n_in, int64_t n_tokens, uint32_t seed) {
  std::vector<float> x = random_floats(static_cast<size_t>(n_in * n_tokens), seed, 2.0f);
  std::mt19937 rng(seed + 1);
  const int64_t nb = n_in * n_tokens / 256;
  for (int64_t b = 0; b < nb; b++) {
    float* blk = x.data() + b * 256;
    switch (rng() % 6) {
      case 0:
        std::fill(blk, blk + 256, 0.0f);
        break;
      case 1:
        for (int j = 0; j < 256; j++) blk[j] = static_cast<float>(static_cast<int>(rng() % 253) - 126) * 0.5f;
        blk[rng() % 256] = -127.0f;
        break;
      case 2:
        blk[3] = 50.0f;
        blk[200] = -50.0f;
        break;
      case 3:
        for (int j = 0; j < 256; j++) blk[j] *= 1e-30f;
        break;
      default:
        break;
    }
  }
  return x;
}

size_t aligned(size_t n) { return (n + 63) / 64 * 64; }

// y equals yref bit for bit: the kernels compute the reference's integer sums exactly and its
// per-block float operations in the same order (no FMA contraction), so nothing may differ.
// Nothing may be written to the padding columns [n_out, ldy) either.
void expect_same(const std::vector<float>& y, const std::vector<float>& yref, int64_t n_out, int64_t n_tokens,
                 int64_t ldy) {
  int n_bad = 0;
  for (int64_t t = 0; t < n_tokens; t++) {
    for (int64_t r = 0; r < ldy; r++) {
      const size_t i = static_cast<size_t>(t * ldy + r);
      if (std::memcmp(&y[i], &yref[i], sizeof(float)) != 0 && n_bad++ < 5)
        ADD_FAILURE() << (r >= n_out ? "wrote past n_out at " : "") << "token " << t << " row " << r << ": "
                      << y[i] << " vs reference " << yref[i];
    }
  }
  EXPECT_EQ(n_bad, 0);
}

struct Shape {
  int64_t n_in, n_out, n_tokens;
};

// Runs kernel k over all rows, split into ranges at multiples of its row_align (as matmul()
// does), and the reference kernel, and compares.
void check_against_reference(const MatmulKernel& k, const Shape& s, uint32_t seed) {
  const GgmlType type = k.weight_type;
  SCOPED_TRACE(std::string(k.name) + " n_in=" + std::to_string(s.n_in) + " n_out=" + std::to_string(s.n_out) +
               " n_tokens=" + std::to_string(s.n_tokens) + " seed=" + std::to_string(seed));
  std::vector<uint8_t> wdata = random_weights(type, s.n_in, s.n_out, seed);
  WeightMatrix w = test::file_matrix(type, wdata, s.n_out, s.n_in);
  WeightMatrix wref = w;
  prepare_weights(w, k.isa);
  ASSERT_EQ(w.kernel, &k);
  prepare_weights(wref, Isa::Scalar);
  const MatmulKernel& ref = *wref.kernel;
  ASSERT_EQ(&ref, reference_matmul_kernel(type));

  const std::vector<float> x = activations(s.n_in, s.n_tokens, seed * 31 + 5);
  const size_t stride = aligned(k.act_row_bytes(s.n_in)), ref_stride = aligned(ref.act_row_bytes(s.n_in));
  std::vector<uint8_t> act(stride * static_cast<size_t>(s.n_tokens) + 64);
  std::vector<uint8_t> ref_act(ref_stride * static_cast<size_t>(s.n_tokens) + 64);
  uint8_t* a = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(act.data()) + 63) & ~uintptr_t{63});
  for (int64_t t = 0; t < s.n_tokens; t++) {
    k.convert_act(x.data() + t * s.n_in, a + stride * t, s.n_in);
    ref.convert_act(x.data() + t * s.n_in, ref_act.data() + ref_stride * t, s.n_in);
  }
  const int64_t ldy = s.n_out + 3;  // a padded output stride
  std::vector<float> y(static_cast<size_t>(ldy * s.n_tokens), -7.0f), yref(y.size(), -7.0f);
  const int64_t align = k.row_align;
  // Uneven ranges: one group, then three, then the rest.
  const int64_t cuts[] = {0, align, 4 * align, s.n_out};
  for (int i = 0; i < 3; i++) {
    const int64_t r0 = std::min(cuts[i], s.n_out), r1 = std::min(cuts[i + 1], s.n_out);
    if (r0 < r1) k.compute(w, a, stride, s.n_tokens, y.data(), ldy, r0, r1);
  }
  ref.compute(wref, ref_act.data(), ref_stride, s.n_tokens, yref.data(), ldy, 0, s.n_out);

  expect_same(y, yref, s.n_out, s.n_tokens, ldy);
}

// The last shape has more row groups than fit one L2 batch of the GEMM loop. The decode-sized
// shapes of 87, 100 and 150 rows end their third range in tiles of 2 and 3 row groups (of 16
// and 8 rows) whose last group is partial.
const Shape kShapes[] = {
    {256, 1, 1},   {256, 1, 33},   {512, 7, 3},     {768, 17, 2},   {256, 33, 7},   {1024, 40, 16},
    {4096, 19, 5}, {256, 4096, 1}, {512, 87, 1},    {768, 150, 1},  {768, 100, 2},  {1024, 150, 3},
    {512, 87, 4},  {512, 100, 33}, {2816, 24, 4},   {4096, 150, 6},
};

// One test instance per (type, ISA); skipped when the CPU cannot run the ISA or no kernel for
// exactly that pair is registered.
struct KernelCase {
  GgmlType type;
  Isa isa;
};

class KquantKernel : public ::testing::TestWithParam<KernelCase> {
 protected:
  void SetUp() override {
    kernel_ = fast_kernel(GetParam().type, GetParam().isa);
    if (!kernel_)
      GTEST_SKIP() << "no " << type_name(GetParam().type) << " kernel for " << isa_name(GetParam().isa)
                   << " here";
  }
  const MatmulKernel* kernel_ = nullptr;
};

TEST_P(KquantKernel, ActivationConversionIsBitIdenticalToReference) {
  const MatmulKernel& k = *kernel_;
  const int64_t n_in = 256 * 12;
  std::vector<float> x = activations(n_in, 1, 7);
  // NaN and infinity follow the reference's rules too (NaN ignored by amax, quantized to 127).
  x[256 * 10 + 5] = std::numeric_limits<float>::quiet_NaN();
  x[256 * 11 + 9] = std::numeric_limits<float>::infinity();
  const Corr corr = corr_of(k);
  const size_t bytes = k.act_row_bytes(n_in);
  ASSERT_EQ(bytes, static_cast<size_t>(n_in / 256) * kquant::act_block_bytes(corr.mode));
  std::vector<uint8_t> got(bytes + 64, 0xAB), want(bytes + 64, 0xAB);
  k.convert_act(x.data(), got.data(), n_in);
  kquant::convert_act_scalar(x.data(), want.data(), n_in, corr.mode, corr.mul);
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), bytes + 64));
}

TEST_P(KquantKernel, MatchesReferenceOverShapes) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) check_against_reference(*kernel_, s, seed++);
}

// The full matmul() driver (threaded conversion and row split, strided x and y) with the
// kernel equals the reference path.
TEST_P(KquantKernel, MatmulDriverMatchesReference) {
  const MatmulKernel& k = *kernel_;
  ThreadPool pool(2);
  const GgmlType type = k.weight_type;
  const int64_t n_in = 768, n_out = 150, n_tokens = 9, ldx = n_in + 5, ldy = n_out + 2;
  std::vector<uint8_t> wdata = random_weights(type, n_in, n_out, 10 + static_cast<uint32_t>(type));
  WeightMatrix w = test::file_matrix(type, wdata, n_out, n_in);
  WeightMatrix wref = w;
  prepare_weights(w, k.isa);
  ASSERT_EQ(w.kernel, &k);
  prepare_weights(wref, Isa::Scalar);
  const std::vector<float> x = random_floats(static_cast<size_t>(ldx * n_tokens), 99);
  std::vector<float> y(static_cast<size_t>(ldy * n_tokens), 3.0f), yref(y.size(), 3.0f);
  std::vector<uint8_t> scratch(matmul_scratch_size(w, n_tokens)),
      scratch_ref(matmul_scratch_size(wref, n_tokens));
  matmul(w, x.data(), ldx, n_tokens, y.data(), ldy, scratch.data(), pool);
  matmul(wref, x.data(), ldx, n_tokens, yref.data(), ldy, scratch_ref.data(), pool);
  expect_same(y, yref, n_out, n_tokens, ldy);
}

TEST(KquantPack, RejectsRowsThatAreNotWholeSuperBlocks) {
  std::vector<uint8_t> data(4096);
  WeightMatrix w;
  w.type = GgmlType::Q4_K;
  w.n_in = 128;  // half a super-block: no valid K-quant row, but pack must not read past it
  w.n_out = 2;
  w.data = data.data();
  w.row_bytes = 72;
  PackedWeights out;
  EXPECT_THROW(kquant::pack_kquant(w, out, 16), Error);
  w.type = GgmlType::Q8_0;
  w.n_in = 256;
  EXPECT_THROW(kquant::pack_kquant(w, out, 16), Error);
}

std::vector<KernelCase> all_cases() {
  std::vector<KernelCase> v;
  for (GgmlType type : kTypes)
    for (Isa isa : kIsas) v.push_back({type, isa});
  return v;
}

INSTANTIATE_TEST_SUITE_P(KquantKernels, KquantKernel, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<KernelCase>& info) {
                           return std::string(type_name(info.param.type)) + "_" + isa_name(info.param.isa);
                         });

}  // namespace
}  // namespace lumen
