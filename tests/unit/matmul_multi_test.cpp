// matmul_multi(): several weight matrices of one input as one pool job must give exactly what
// separate matmul() calls give, whatever the mix of types (activation formats shared or not),
// for decode-sized and prefill-sized batches, with strided inputs and outputs. matmul_grouped()
// (products with inputs of their own, some shared: a mixture's experts) likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/quant/quant_ref.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace lumen {
namespace {

struct OwnedMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

OwnedMatrix make_matrix(GgmlType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  OwnedMatrix m;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t rb = row_size(type, n_in);
  m.bytes.resize(rb * static_cast<size_t>(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; r++) {
    for (float& v : row) v = nd(rng);
    if (type == GgmlType::F32) std::memcpy(&m.bytes[r * rb], row.data(), rb);
    else weight_quantizer(type)(row.data(), &m.bytes[r * rb], n_in);
  }
  m.w.type = type;
  m.w.n_in = n_in;
  m.w.n_out = n_out;
  m.w.data = m.bytes.data();
  m.w.row_bytes = rb;
  prepare_weights(m.w, active_isa());
  return m;
}

void check_mix(const std::vector<GgmlType>& types, const std::vector<int64_t>& n_outs, int64_t n_tokens) {
  SCOPED_TRACE(testing::Message() << "tokens " << n_tokens);
  const int64_t n_in = 512, ldx = n_in + 3;
  ThreadPool pool(3);
  std::vector<OwnedMatrix> ms;
  for (size_t i = 0; i < types.size(); i++) ms.push_back(make_matrix(types[i], n_in, n_outs[i], 7 + i));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(ldx * n_tokens));
  for (float& v : x) v = nd(rng);

  std::vector<std::vector<float>> y(ms.size()), y_ref(ms.size());
  std::vector<MatmulOutput> outs;
  std::vector<const WeightMatrix*> ws;
  size_t scratch_ref_size = 0;
  for (size_t i = 0; i < ms.size(); i++) {
    const int64_t ldy = n_outs[i] + 1;
    y[i].assign(static_cast<size_t>(ldy * n_tokens), -7.0f);
    y_ref[i] = y[i];
    outs.push_back({&ms[i].w, y[i].data(), ldy});
    ws.push_back(&ms[i].w);
    scratch_ref_size = std::max(scratch_ref_size, matmul_scratch_size(ms[i].w, n_tokens));
  }
  std::vector<uint8_t> scratch(matmul_multi_scratch_size(ws.data(), static_cast<int>(ws.size()), n_tokens));
  std::vector<uint8_t> scratch_ref(scratch_ref_size);
  matmul_multi(outs.data(), static_cast<int>(outs.size()), x.data(), ldx, n_tokens, scratch.data(), pool);
  for (size_t i = 0; i < ms.size(); i++)
    matmul(ms[i].w, x.data(), ldx, n_tokens, y_ref[i].data(), n_outs[i] + 1, scratch_ref.data(), pool);
  for (size_t i = 0; i < ms.size(); i++) {
    SCOPED_TRACE(testing::Message() << "matrix " << i << " (" << type_name(types[i]) << ")");
    EXPECT_EQ(y[i], y_ref[i]);  // bit for bit, and the padding between rows untouched
  }
}

TEST(MatmulMulti, SameTypeAsSeparateCalls) {
  for (int64_t n_tokens : {1, 2, 7, 40})
    check_mix({GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0}, {200, 64, 64}, n_tokens);
}

TEST(MatmulMulti, MixedTypesShareOrSplitTheActivationConversion) {
  // Q4_K and Q6_K share Q8_K activations, Q4_0 wants Q8_0, F16 its own rounding: three formats.
  for (int64_t n_tokens : {1, 5, 33})
    check_mix({GgmlType::Q4_K, GgmlType::Q4_0, GgmlType::Q6_K, GgmlType::F16}, {256, 96, 48, 80}, n_tokens);
}

TEST(MatmulMulti, OneRowMatrices) {
  for (int64_t n_tokens : {1, 9}) check_mix({GgmlType::Q8_0, GgmlType::F32}, {1, 1}, n_tokens);
}

// Products with inputs of different lengths and token counts, some shared (converted once), in
// one job: each must equal its own matmul() call bit for bit.
TEST(MatmulGrouped, OwnInputsEqualSeparateCalls) {
  ThreadPool pool(3);
  struct Spec {
    GgmlType type;
    int64_t n_in, n_out, n_tokens;
    int input;  // which of the inputs below
  };
  const std::vector<Spec> specs = {
      {GgmlType::Q4_0, 256, 96, 1, 0}, {GgmlType::Q8_0, 256, 64, 1, 0},  {GgmlType::Q4_K, 256, 128, 1, 0},
      {GgmlType::Q8_0, 256, 80, 12, 1}, {GgmlType::Q8_0, 256, 40, 12, 1}, {GgmlType::Q6_K, 512, 32, 3, 2},
      {GgmlType::F16, 512, 48, 20, 3},
  };
  const int64_t inputs[][2] = {{256, 1}, {256, 12}, {512, 3}, {512, 20}};  // n_in, n_tokens
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> xs;
  for (const auto& in : inputs) {
    xs.emplace_back(static_cast<size_t>((in[0] + 5) * in[1]));
    for (float& v : xs.back()) v = nd(rng);
  }
  std::vector<OwnedMatrix> ms;
  std::vector<std::vector<float>> y(specs.size()), y_ref(specs.size());
  std::vector<MatmulProblem> ps;
  for (size_t i = 0; i < specs.size(); i++) ms.push_back(make_matrix(specs[i].type, specs[i].n_in, specs[i].n_out, 11 + i));
  for (size_t i = 0; i < specs.size(); i++) {
    const Spec& s = specs[i];
    const int64_t ldy = s.n_out + 2;
    y[i].assign(static_cast<size_t>(ldy * s.n_tokens), -3.0f);
    y_ref[i] = y[i];
    ps.push_back({&ms[i].w, xs[s.input].data(), s.n_in + 5, s.n_tokens, y[i].data(), ldy});
  }
  std::vector<uint8_t> scratch(matmul_grouped_scratch_size(ps.data(), static_cast<int>(ps.size())));
  matmul_grouped(ps.data(), static_cast<int>(ps.size()), scratch.data(), pool);
  for (size_t i = 0; i < specs.size(); i++) {
    const Spec& s = specs[i];
    SCOPED_TRACE(testing::Message() << "product " << i << " (" << type_name(s.type) << ")");
    std::vector<uint8_t> scratch_ref(matmul_scratch_size(ms[i].w, s.n_tokens));
    matmul(ms[i].w, xs[s.input].data(), s.n_in + 5, s.n_tokens, y_ref[i].data(), s.n_out + 2, scratch_ref.data(), pool);
    EXPECT_EQ(y[i], y_ref[i]);
  }
}

// Few-token products (decode) are shared out as per-thread ranges claimed from the front and
// stolen from the back: every row must be computed exactly once, with the bits one thread
// gives, whatever the thread count and however the claims race (repeated to give races a
// chance).
TEST(MatmulGrouped, FewTokenRangesComputeEveryRowOnce) {
  const struct {
    GgmlType type;
    int64_t n_out;
  } specs[] = {{GgmlType::Q4_0, 352}, {GgmlType::Q8_0, 64}, {GgmlType::F32, 32}, {GgmlType::Q4_K, 1000}, {GgmlType::F16, 70}};
  const int64_t n_in = 256;
  std::vector<OwnedMatrix> ms;
  for (size_t i = 0; i < std::size(specs); i++) ms.push_back(make_matrix(specs[i].type, n_in, specs[i].n_out, 40 + i));
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n_tokens : {1, 3}) {
    std::vector<float> x(static_cast<size_t>(n_in * n_tokens));
    for (float& v : x) v = nd(rng);
    std::vector<std::vector<float>> want(std::size(specs)), got(std::size(specs));
    std::vector<MatmulProblem> ps;
    for (size_t i = 0; i < std::size(specs); i++) {
      want[i].assign(static_cast<size_t>(specs[i].n_out * n_tokens), 0.0f);
      ps.push_back({&ms[i].w, x.data(), n_in, n_tokens, want[i].data(), specs[i].n_out});
    }
    std::vector<uint8_t> scratch(matmul_grouped_scratch_size(ps.data(), static_cast<int>(ps.size())));
    ThreadPool one(1);  // the chunk split, on the calling thread alone
    matmul_grouped(ps.data(), static_cast<int>(ps.size()), scratch.data(), one);
    for (int threads : {2, 3, 4, 7}) {
      ThreadPool pool(threads);
      for (int rep = 0; rep < 40; rep++) {
        for (size_t i = 0; i < std::size(specs); i++) {
          got[i].assign(want[i].size(), std::numeric_limits<float>::quiet_NaN());
          ps[i].y = got[i].data();
        }
        matmul_grouped(ps.data(), static_cast<int>(ps.size()), scratch.data(), pool);
        for (size_t i = 0; i < std::size(specs); i++)
          ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0)
              << threads << " threads, " << n_tokens << " tokens, product " << i << ", repetition " << rep;
      }
    }
  }
}

}  // namespace
}  // namespace lumen
