// The attention kernels (kernels/attention.h) against the scalar reference: odd head dims,
// GQA ratios 1/2/4/8, sequence lengths 1..300, F32 and F16 caches, several sequences in one
// batch; plus what the forward pass relies on: a query's output does not depend on the batch
// it is computed in, and row sources other than the contiguous cache work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kv/kv_storage.h"

namespace lumen {
namespace {

std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (isa_supported(isa, cpu_features())) v.push_back(isa);
  return v;
}

struct AttnCase {
  AttentionParams p;
  std::unique_ptr<KvStorage> kv;
  std::vector<std::vector<BlockId>> tables;  // per sequence: shuffled blocks (a paged cache)
  std::vector<PagedKvSource> sources;
  std::vector<KvRows> rows;
  std::vector<int32_t> seq_ids, positions;
  std::vector<float> q;
  int64_t ldq = 0, ldo = 0;
};

// n_seq sequences of the given lengths, all positions cached, one query per position (the
// batch a prefill of every sequence would make), queries interleaved across sequences.
AttnCase make_setup(int64_t n_head, int64_t n_head_kv, int64_t dk, int64_t dv, GgmlType kv_type,
                 const std::vector<int64_t>& lengths, uint32_t seed) {
  AttnCase s;
  s.p.n_head = n_head;
  s.p.n_head_kv = n_head_kv;
  s.p.head_dim_k = dk;
  s.p.head_dim_v = dv;
  s.p.scale = 1.0f / std::sqrt(static_cast<float>(dk));
  s.p.kv_type = kv_type;
  int64_t n_ctx = 1;
  for (int64_t l : lengths) n_ctx = std::max(n_ctx, l);
  KvLayout layout;
  layout.n_layer = 1;
  layout.kv_dim_k = n_head_kv * dk;
  layout.kv_dim_v = n_head_kv * dv;
  layout.k_type = layout.v_type = kv_type;
  layout.block_size = 16;
  std::vector<BlockId> all;
  for (int64_t l : lengths)
    for (int64_t b = 0; b < (l + 15) / 16; b++) all.push_back(static_cast<BlockId>(all.size()));
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  s.kv = std::make_unique<KvStorage>(layout, static_cast<int32_t>(all.size()));
  size_t next = 0;
  for (int64_t l : lengths) {
    s.tables.emplace_back(all.begin() + next, all.begin() + next + (l + 15) / 16);
    next += (l + 15) / 16;
  }
  for (const auto& t : s.tables) s.sources.push_back(s.kv->source(0, t));
  for (const auto& src : s.sources) s.rows.push_back(src.rows());
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> k(n_head_kv * dk), v(n_head_kv * dv);
  for (size_t sq = 0; sq < lengths.size(); sq++)
    for (int64_t pos = 0; pos < lengths[sq]; pos++) {
      for (float& x : k) x = 2.0f * g(rng);  // spread scores: softmax far from uniform
      for (float& x : v) x = g(rng);
      s.kv->write(0, static_cast<int64_t>(s.tables[sq][pos / 16]) * 16 + pos % 16, k.data(), v.data());
    }
  for (int64_t pos = 0; pos < n_ctx; pos++)
    for (size_t sq = 0; sq < lengths.size(); sq++)
      if (pos < lengths[sq]) {
        s.seq_ids.push_back(static_cast<int32_t>(sq));
        s.positions.push_back(static_cast<int32_t>(pos));
      }
  s.ldq = n_head * dk + 3;
  s.ldo = n_head * dv + 5;
  s.q.resize(s.seq_ids.size() * s.ldq);
  for (float& x : s.q) x = g(rng);
  return s;
}

AttentionBatch batch_of(const AttnCase& s, const int32_t* seqs, const int32_t* positions, int64_t n) {
  AttentionBatch b;
  b.seq_rows = s.rows.data();
  b.n_seq = static_cast<int64_t>(s.rows.size());
  b.seq = seqs;
  b.positions = positions;
  b.n_tokens = n;
  return b;
}

std::vector<float> run(const AttnCase& s, Isa isa, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(s.seq_ids.size());
  std::vector<float> out(n * s.ldo, -777.0f);
  attention(s.p, batch_of(s, s.seq_ids.data(), s.positions.data(), n), s.q.data(), s.ldq, out.data(), s.ldo, pool, isa);
  return out;
}

void expect_match(const AttnCase& s, const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  const int64_t n = static_cast<int64_t>(s.seq_ids.size());
  const int64_t width = s.p.n_head * s.p.head_dim_v;
  int bad = 0;
  for (int64_t t = 0; t < n; t++)
    for (int64_t i = 0; i < s.ldo; i++) {
      const float g = got[t * s.ldo + i], w = want[t * s.ldo + i];
      if (i >= width) {  // padding of the output rows stays untouched
        if (g != -777.0f && bad++ < 3) ADD_FAILURE() << what << ": wrote past the heads at token " << t;
        continue;
      }
      // Outputs are convex combinations of V rows (values ~ N(0, 1)): an absolute tolerance at
      // their scale, as scores rounded differently move every output a little.
      if (!(std::fabs(g - w) <= 1e-5 + 1e-5 * std::fabs(w)) && bad++ < 3)
        ADD_FAILURE() << what << ": token " << t << " (seq " << s.seq_ids[t] << " pos " << s.positions[t] << ") elem "
                      << i << ": " << g << " vs " << w;
    }
  EXPECT_EQ(bad, 0) << what;
}

struct Shape {
  int64_t n_head, n_head_kv, dk, dv;
};

TEST(Attention, MatchesReference) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  const Shape shapes[] = {{1, 1, 7, 7}, {2, 1, 16, 16}, {4, 1, 33, 33}, {8, 1, 64, 64}, {8, 2, 64, 64},
                          {8, 8, 80, 80}, {4, 2, 128, 128}, {6, 3, 24, 40}, {16, 2, 1, 1}};
  for (GgmlType type : {GgmlType::F32, GgmlType::F16})
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(testing::Message() << type_name(type) << " heads " << sh.n_head << "/" << sh.n_head_kv << " dims "
                                      << sh.dk << "/" << sh.dv);
      const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, type, {1, 70, 5, 130}, 11);
      const auto want = run(s, Isa::Scalar, pool);
      for (Isa isa : isas) expect_match(s, run(s, isa, pool), want, isa_name(isa));
    }
}

TEST(Attention, LongSequence) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
    const AttnCase s = make_setup(8, 2, 64, 64, type, {300}, 12);
    const auto want = run(s, Isa::Scalar, pool);
    for (Isa isa : isas) expect_match(s, run(s, isa, pool), want, isa_name(isa));
  }
}

// Decode (the last query alone, and a few queries of one sequence) gives the same bits as the
// full prefill batch: the forward pass's cache-vs-recompute property.
TEST(Attention, QueryResultIndependentOfBatch) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::F32, GgmlType::F16})
    for (Isa isa : isas) {
      const AttnCase s = make_setup(8, 2, 48, 48, type, {150, 9}, 13);
      const auto all = run(s, isa, pool);
      const int64_t n = static_cast<int64_t>(s.seq_ids.size());
      for (int64_t first : {int64_t{0}, n - 1, n - 7, int64_t{100}})
        for (int64_t count : {1, 3, 7}) {
          if (first + count > n) continue;
          std::vector<int32_t> seqs(s.seq_ids.begin() + first, s.seq_ids.begin() + first + count);
          std::vector<int32_t> pos(s.positions.begin() + first, s.positions.begin() + first + count);
          std::vector<float> out(count * s.ldo);
          attention(s.p, batch_of(s, seqs.data(), pos.data(), count), s.q.data() + first * s.ldq, s.ldq, out.data(),
                    s.ldo, pool, isa);
          for (int64_t t = 0; t < count; t++)
            for (int64_t i = 0; i < s.p.n_head * s.p.head_dim_v; i++)
              ASSERT_EQ(out[t * s.ldo + i], all[(first + t) * s.ldo + i])
                  << isa_name(isa) << " " << type_name(type) << " token " << first + t << " elem " << i;
        }
    }
}

// A row source that is not one contiguous array: each position's rows in its own allocation,
// handed out in reverse memory order (a stand-in for a paged cache).
struct ScatteredRows {
  std::vector<std::vector<float>> k, v;
  static void fetch(const void* ctx, int64_t pos0, int64_t n, const uint8_t** k_rows, const uint8_t** v_rows) {
    const auto& s = *static_cast<const ScatteredRows*>(ctx);
    for (int64_t i = 0; i < n; i++) {
      k_rows[i] = reinterpret_cast<const uint8_t*>(s.k[pos0 + i].data());
      v_rows[i] = reinterpret_cast<const uint8_t*>(s.v[pos0 + i].data());
    }
  }
};

TEST(Attention, TileKernelsWithAnyRowSource) {
  AttentionParams p;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim_k = 20;
  p.head_dim_v = 12;
  p.scale = 0.3f;
  const int64_t n_pos = 200;
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 1.0f);
  ScatteredRows rows;
  for (int64_t i = 0; i < n_pos; i++) {
    rows.k.emplace_back(p.n_head_kv * p.head_dim_k);
    rows.v.emplace_back(p.n_head_kv * p.head_dim_v);
    for (float& x : rows.k.back()) x = g(rng);
    for (float& x : rows.v.back()) x = g(rng);
  }
  const KvRows src{ScatteredRows::fetch, &rows};
  // Three queries at unrelated positions (the kernel needs no consecutive positions).
  const std::vector<int64_t> q_rows = {2, 0, 1}, n_kv = {1, 200, 65};
  std::vector<float> q(3 * p.n_head * p.head_dim_k);
  for (float& x : q) x = g(rng);
  std::vector<float> scratch(attention_scratch_floats(p, 3, n_pos));
  std::vector<float> want(3 * p.n_head * p.head_dim_v), got(want.size());
  for (int64_t hk = 0; hk < p.n_head_kv; hk++) {
    AttentionQueries qs{q.data(), p.n_head * p.head_dim_k, want.data(), p.n_head * p.head_dim_v, q_rows.data(), n_kv.data(), 3};
    attention_tile_reference(p, src, qs, hk, scratch.data());
    for (Isa isa : simd_isas()) {
      qs.out = got.data();
      attention_tile_kernel(isa)(p, src, qs, hk, scratch.data());
      for (int64_t r = 0; r < 3; r++)
        for (int64_t i = hk * 2 * p.head_dim_v; i < (hk + 1) * 2 * p.head_dim_v; i++) {
          const float a = got[r * p.n_head * p.head_dim_v + i], b = want[r * p.n_head * p.head_dim_v + i];
          EXPECT_NEAR(a, b, 1e-5 + 1e-5 * std::fabs(b)) << isa_name(isa) << " query " << r << " elem " << i;
        }
    }
  }
}

TEST(Attention, RejectsHeadsThatDoNotGroup) {
  AttentionParams p;
  p.n_head = 6;
  p.n_head_kv = 4;
  p.head_dim_k = p.head_dim_v = 8;
  ThreadPool pool(1);
  const int32_t seq = 0, pos = 0;
  const KvRows rows{nullptr, nullptr};
  AttentionBatch b{&rows, 1, &seq, &pos, 1};
  std::vector<float> q(48), out(48);
  EXPECT_THROW(attention(p, b, q.data(), 48, out.data(), 48, pool, Isa::Scalar), Error);
}

}  // namespace
}  // namespace lumen
