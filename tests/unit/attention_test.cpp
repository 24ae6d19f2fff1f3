// The attention kernels (kernels/attention.h) against the scalar reference: odd head dims,
// GQA ratios 1/2/4/8, sequence lengths 1..300, every K/V cache type (F32, F16, BF16, Q8_0,
// Q4_0, K and V alike and mixed), sliding windows, several sequences in one batch; plus what the
// forward pass relies on: a query's output does not depend on the batch it is computed in, row
// sources other than the contiguous cache work, a windowed kernel never fetches a position
// below its tile's window, and the prepare hook runs once per head before that head is read.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
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

struct KvTypes {
  GgmlType k, v;
};

// The five types with K == V, and mixed pairs.
const KvTypes kAllTypes[] = {{GgmlType::F32, GgmlType::F32},   {GgmlType::F16, GgmlType::F16},
                             {GgmlType::BF16, GgmlType::BF16}, {GgmlType::Q8_0, GgmlType::Q8_0},
                             {GgmlType::Q4_0, GgmlType::Q4_0}, {GgmlType::Q8_0, GgmlType::Q4_0},
                             {GgmlType::Q4_0, GgmlType::Q8_0}, {GgmlType::F16, GgmlType::Q8_0},
                             {GgmlType::BF16, GgmlType::Q4_0}};

std::string name_of(KvTypes t) { return std::string(type_name(t.k)) + "/" + std::string(type_name(t.v)); }

struct AttnCase {
  AttentionParams p;
  std::unique_ptr<KvStorage> kv;
  std::vector<std::vector<BlockId>> tables;  // per sequence: shuffled blocks (a paged cache)
  std::vector<PagedKvSource> sources;
  std::vector<KvRows> rows;
  std::vector<int32_t> seq_ids, positions;
  std::vector<float> q;
  std::vector<std::vector<std::vector<float>>> k_in, v_in;  // per sequence, per position: as written
  int64_t ldq = 0, ldo = 0;
};

// n_seq sequences of the given lengths, all positions cached, one query per position (the
// batch a prefill of every sequence would make), queries interleaved across sequences.
AttnCase make_setup(int64_t n_head, int64_t n_head_kv, int64_t dk, int64_t dv, KvTypes types,
                    const std::vector<int64_t>& lengths, uint32_t seed, int64_t window = 0) {
  AttnCase s;
  s.p.n_head = n_head;
  s.p.n_head_kv = n_head_kv;
  s.p.head_dim_k = dk;
  s.p.head_dim_v = dv;
  s.p.scale = 1.0f / std::sqrt(static_cast<float>(dk));
  s.p.k_type = types.k;
  s.p.v_type = types.v;
  s.p.window = window;
  int64_t n_ctx = 1;
  for (int64_t l : lengths) n_ctx = std::max(n_ctx, l);
  KvLayout layout;
  layout.n_layer = 1;
  layout.n_head_kv = n_head_kv;
  layout.kv_dim_k = n_head_kv * dk;
  layout.kv_dim_v = n_head_kv * dv;
  layout.k_type = types.k;
  layout.v_type = types.v;
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
  s.k_in.resize(lengths.size());
  s.v_in.resize(lengths.size());
  for (size_t sq = 0; sq < lengths.size(); sq++)
    for (int64_t pos = 0; pos < lengths[sq]; pos++) {
      for (float& x : k) x = 2.0f * g(rng);  // spread scores: softmax far from uniform
      for (float& x : v) x = g(rng);
      s.kv->write(0, static_cast<int64_t>(s.tables[sq][pos / 16]) * 16 + pos % 16, k.data(), v.data());
      s.k_in[sq].push_back(k);
      s.v_in[sq].push_back(v);
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

AttentionBatch batch_of(const AttnCase& s, const int32_t* seqs, const int32_t* positions, int64_t n,
                        const KvRows* rows = nullptr) {
  AttentionBatch b;
  b.seq_rows = rows ? rows : s.rows.data();
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

void expect_match(const AttnCase& s, const std::vector<float>& got, const std::vector<float>& want, const char* what,
                  double tol = 1e-5) {
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
      if (!(std::fabs(g - w) <= tol + tol * std::fabs(w)) && bad++ < 3)
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
                          {8, 8, 80, 80}, {4, 2, 128, 128}, {6, 3, 24, 40}, {16, 2, 1, 1}, {8, 4, 8, 8}};
  for (KvTypes types : kAllTypes)
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(testing::Message() << name_of(types) << " heads " << sh.n_head << "/" << sh.n_head_kv << " dims "
                                      << sh.dk << "/" << sh.dv);
      const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, types, {1, 70, 5, 130}, 11);
      const auto want = run(s, Isa::Scalar, pool);
      for (Isa isa : isas) expect_match(s, run(s, isa, pool), want, isa_name(isa));
    }
}

TEST(Attention, LongSequence) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  for (KvTypes types : kAllTypes) {
    SCOPED_TRACE(name_of(types));
    const AttnCase s = make_setup(8, 2, 64, 64, types, {300}, 12);
    const auto want = run(s, Isa::Scalar, pool);
    for (Isa isa : isas) expect_match(s, run(s, isa, pool), want, isa_name(isa));
  }
}

// The plain softmax (in double) of a query's scores sc over positions lo.. of sequence sq, and
// the weighted sum of their V rows as written (head hk) into out[0, dv).
void plain_softmax_v(std::vector<double>& sc, const AttnCase& s, int64_t sq, int64_t lo, int64_t hk, int64_t dv,
                     float* out) {
  const double m = *std::max_element(sc.begin(), sc.end());
  double sum = 0;
  for (double& x : sc) sum += (x = std::exp(x - m));
  for (int64_t i = 0; i < dv; i++) {
    double o = 0;
    for (size_t j = 0; j < sc.size(); j++) o += sc[j] / sum * s.v_in[sq][lo + static_cast<int64_t>(j)][hk * dv + i];
    out[i] = static_cast<float>(o);
  }
}

// The windowed reference is attention over the last W positions, written out plainly: scores
// in double over [max(0, p - W + 1), p], a max-shifted softmax, the weighted sum of V.
TEST(Attention, WindowedReferenceIsAMaskedSoftmax) {
  ThreadPool pool(2);
  for (int64_t window : {1, 5, 64, 100})
    for (const Shape& sh : {Shape{8, 2, 64, 64}, Shape{3, 3, 7, 12}}) {
      SCOPED_TRACE(testing::Message() << "window " << window << " dims " << sh.dk << "/" << sh.dv);
      const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, {GgmlType::F32, GgmlType::F32},
                                    {300, 37, 129}, 21, window);
      const auto got = run(s, Isa::Scalar, pool);
      std::vector<float> want(got.size(), -777.0f);
      const int64_t group = sh.n_head / sh.n_head_kv;
      for (size_t t = 0; t < s.seq_ids.size(); t++) {
        const int64_t sq = s.seq_ids[t], pos = s.positions[t], lo = std::max<int64_t>(0, pos - window + 1);
        for (int64_t h = 0; h < sh.n_head; h++) {
          const int64_t hk = h / group;
          const float* q = &s.q[t * s.ldq + h * sh.dk];
          std::vector<double> sc;
          for (int64_t j = lo; j <= pos; j++) {
            double d = 0;
            for (int64_t i = 0; i < sh.dk; i++) d += static_cast<double>(q[i]) * s.k_in[sq][j][hk * sh.dk + i];
            sc.push_back(d * s.p.scale);
          }
          plain_softmax_v(sc, s, sq, lo, hk, sh.dv, &want[t * s.ldo + h * sh.dv]);
        }
      }
      expect_match(s, got, want, "reference vs plain", 2e-5);
    }
}

// A block-type K (Q8_0, Q4_0) meets each query head rounded to Q8_0, as llama.cpp's attention
// does for those caches: the reference's scores are the stored K's values against the query's
// Q8_0 values (from_float's rounding of the zero-padded row), written out plainly in double.
TEST(Attention, BlockKeysMeetQueriesRoundedToQ8_0) {
  ThreadPool pool(2);
  for (GgmlType kt : {GgmlType::Q8_0, GgmlType::Q4_0})
    for (const Shape& sh : {Shape{8, 2, 64, 64}, Shape{3, 3, 7, 12}, Shape{2, 1, 80, 16}}) {
      SCOPED_TRACE(testing::Message() << type_name(kt) << " dims " << sh.dk << "/" << sh.dv);
      const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, {kt, GgmlType::F32}, {90, 33}, 23);
      const auto got = run(s, Isa::Scalar, pool);
      std::vector<float> want(got.size(), -777.0f);
      const int64_t group = sh.n_head / sh.n_head_kv, nblk = (sh.dk + 31) / 32;
      std::vector<float> kf(sh.dk), padded(nblk * 32), qr(nblk * 32);
      std::vector<uint8_t> q8(nblk * 34);
      for (size_t t = 0; t < s.seq_ids.size(); t++) {
        const int64_t sq = s.seq_ids[t], pos = s.positions[t];
        for (int64_t h = 0; h < sh.n_head; h++) {
          const int64_t hk = h / group;
          std::fill(padded.begin(), padded.end(), 0.0f);
          std::copy_n(&s.q[t * s.ldq + h * sh.dk], sh.dk, padded.begin());
          type_traits(GgmlType::Q8_0).from_float(padded.data(), q8.data(), nblk * 32);
          kv_row_to_float(GgmlType::Q8_0, q8.data(), 0, nblk * 32, qr.data());
          std::vector<double> sc;
          for (int64_t j = 0; j <= pos; j++) {
            const int64_t slot = static_cast<int64_t>(s.tables[sq][j / 16]) * 16 + j % 16;
            kv_row_to_float(kt, s.kv->k_head(0, slot, hk), 0, sh.dk, kf.data());
            double d = 0;
            for (int64_t i = 0; i < sh.dk; i++) d += static_cast<double>(qr[i]) * kf[i];
            sc.push_back(d * s.p.scale);
          }
          plain_softmax_v(sc, s, sq, 0, hk, sh.dv, &want[t * s.ldo + h * sh.dv]);
        }
      }
      expect_match(s, got, want, "reference vs plain", 2e-5);
    }
}

TEST(Attention, WindowedKernelsMatchReference) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  const Shape shapes[] = {{8, 2, 64, 64}, {6, 3, 24, 40}, {1, 1, 7, 7}, {8, 4, 8, 8}};
  for (int64_t window : {1, 5, 64, 100})
    for (KvTypes types : kAllTypes)
      for (const Shape& sh : shapes) {
        SCOPED_TRACE(testing::Message() << "window " << window << " " << name_of(types) << " heads " << sh.n_head << "/"
                                        << sh.n_head_kv << " dims " << sh.dk << "/" << sh.dv);
        const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, types, {300, 70, 1, 130}, 22, window);
        const auto want = run(s, Isa::Scalar, pool);
        for (Isa isa : isas) expect_match(s, run(s, isa, pool), want, isa_name(isa));
      }
}

// Decode (the last query alone, and a few queries of one sequence) gives the same bits as the
// full prefill batch: the forward pass's cache-vs-recompute property, with and without a window
// (a lone query of a group of 4 or 8 reads element-type V in place, a batch stages it; a group
// of 2 or 1 shares AVX-512's row passes with the next queries' heads, each with its own keys).
TEST(Attention, QueryResultIndependentOfBatch) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  const KvTypes types_list[] = {{GgmlType::F32, GgmlType::F32},   {GgmlType::F16, GgmlType::F16},
                                {GgmlType::BF16, GgmlType::BF16}, {GgmlType::Q8_0, GgmlType::Q8_0},
                                {GgmlType::Q4_0, GgmlType::Q4_0}, {GgmlType::Q8_0, GgmlType::Q4_0}};
  for (int64_t window : {0, 5, 64, 100})
    for (KvTypes types : types_list)
      for (const Shape& sh : {Shape{8, 2, 48, 48}, Shape{16, 2, 64, 64}, Shape{8, 4, 8, 8}, Shape{3, 3, 40, 24}})
        for (Isa isa : isas) {
          const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, types, {150, 9}, 13, window);
          const auto all = run(s, isa, pool);
          const int64_t n = static_cast<int64_t>(s.seq_ids.size());
          for (int64_t first : {int64_t{0}, n - 1, n - 7, int64_t{100}, int64_t{140}})
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
                      << isa_name(isa) << " " << name_of(types) << " window " << window << " dk " << sh.dk << " token "
                      << first + t << " elem " << i;
            }
        }
}

// Queries past kAttentionSpan keys: the tiles fold their spans' softmax states in order. Against
// the reference (one pass over every key), windows starting inside a span included.
TEST(Attention, SpansFoldedInOrderMatchReference) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool(2);
  for (int64_t window : {0, 700})
    for (KvTypes types : {KvTypes{GgmlType::F32, GgmlType::F32}, KvTypes{GgmlType::F16, GgmlType::F16},
                          KvTypes{GgmlType::Q8_0, GgmlType::Q4_0}})
      for (const Shape& sh : {Shape{4, 1, 64, 64}, Shape{6, 3, 24, 40}}) {
        SCOPED_TRACE(testing::Message() << name_of(types) << " window " << window << " dims " << sh.dk << "/" << sh.dv);
        const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, types,
                                      {2 * kAttentionSpan + 77, kAttentionSpan + 1}, 51, window);
        const auto want = run(s, Isa::Scalar, pool);
        for (Isa isa : isas) expect_match(s, run(s, isa, pool), want, isa_name(isa));
      }
}

// A decode of one sequence has one tile per KV head; with fewer of them than threads,
// attention() cuts their keys into pieces of whole spans, run as tiles of their own, and merges
// the spans. The result is the unsplit one's (the query inside a whole prefill batch), bit for
// bit, whatever the threads (1 KV head splits on 2 and 4, 3 KV heads on 4).
TEST(Attention, SplitSpansGiveTheUnsplitBits) {
  const auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 on this machine";
  ThreadPool pool1(1), pool2(2), pool4(4);
  for (int64_t window : {0, 700})
    for (KvTypes types : {KvTypes{GgmlType::F16, GgmlType::F16}, KvTypes{GgmlType::Q8_0, GgmlType::Q4_0}})
      for (const Shape& sh : {Shape{4, 1, 64, 64}, Shape{9, 3, 64, 64}, Shape{6, 3, 24, 40}})
        for (Isa isa : isas) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << name_of(types) << " window " << window << " dims "
                                          << sh.n_head << "/" << sh.n_head_kv << " " << sh.dk << "/" << sh.dv);
          const AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, types, {3 * kAttentionSpan + 5}, 52, window);
          const auto all = run(s, isa, pool2);  // hundreds of tiles: none split
          const int64_t n = static_cast<int64_t>(s.seq_ids.size());
          for (ThreadPool* pool : {&pool1, &pool2, &pool4})
            for (int64_t t : {n - 1, 2 * kAttentionSpan, kAttentionSpan + 3, kAttentionSpan - 1}) {
              std::vector<float> out(s.ldo);
              attention(s.p, batch_of(s, &s.seq_ids[t], &s.positions[t], 1), s.q.data() + t * s.ldq, s.ldq, out.data(),
                        s.ldo, *pool, isa);
              for (int64_t i = 0; i < s.p.n_head * s.p.head_dim_v; i++)
                ASSERT_EQ(out[i], all[t * s.ldo + i]) << pool->n_threads() << " threads, token " << t << " elem " << i;
            }
        }
}

// Soft-capped scores (Gemma 2): kernels against the reference, the reference against the capped
// scores written out (a cap of 1 squeezes them hard), and a query's result alone as in a batch.
// attention()'s prepare hook (the decoder's per-head biases, norms, rotation and KV-cache write):
// run once per (token, KV head), before that head's queries and keys are read: inside the tiles
// for a decode-like step, before every tile for a prompt over several tiles or a split tile;
// either way with the bits of a batch prepared before the call. Here the batch's query rows are
// doubled and its K/V slots garbled, and preparing a head halves its queries and writes its
// K/V back.
struct PrepareCase {
  AttnCase* s;
  std::vector<int32_t> seqs, positions;
  std::vector<float> q;
  std::vector<std::atomic<int>> calls;  // per (token, KV head)

  static void run(const void* ctx, int64_t t, int64_t hk) {
    auto& c = *static_cast<PrepareCase*>(const_cast<void*>(ctx));
    const AttentionParams& p = c.s->p;
    c.calls[t * p.n_head_kv + hk]++;
    const int64_t group = p.n_head / p.n_head_kv;
    for (int64_t i = 0; i < group * p.head_dim_k; i++) c.q[t * c.s->ldq + hk * group * p.head_dim_k + i] *= 0.5f;
    const int32_t sq = c.seqs[t], pos = c.positions[t];
    c.s->kv->write_head(0, slot_of(*c.s, sq, pos), hk, c.s->k_in[sq][pos].data() + hk * p.head_dim_k,
                        c.s->v_in[sq][pos].data() + hk * p.head_dim_v);
  }
  static int64_t slot_of(const AttnCase& s, int32_t sq, int32_t pos) {
    return static_cast<int64_t>(s.tables[sq][pos / 16]) * 16 + pos % 16;
  }
};

TEST(Attention, PrepareRunsOncePerHeadBeforeItIsRead) {
  std::vector<Isa> isas = simd_isas();
  isas.push_back(Isa::Scalar);
  ThreadPool pool1(1), pool2(2), pool4(4);
  for (const Shape& sh : {Shape{8, 2, 64, 64}, Shape{4, 1, 64, 64}, Shape{9, 3, 40, 24}})
    for (KvTypes types : {KvTypes{GgmlType::F16, GgmlType::F16}, KvTypes{GgmlType::Q8_0, GgmlType::Q4_0}})
      for (Isa isa : isas) {
        AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, types, {40, 7, 600}, 21);
        const std::vector<float> want = run(s, isa, pool2);
        const auto index_of = [&](int32_t sq, int32_t pos) {
          for (size_t i = 0; i < s.seq_ids.size(); i++)
            if (s.seq_ids[i] == sq && s.positions[i] == pos) return static_cast<int64_t>(i);
          ADD_FAILURE() << "no token " << sq << "/" << pos;
          return int64_t{0};
        };
        std::vector<std::vector<int64_t>> batches;
        batches.push_back({index_of(0, 39), index_of(1, 6), index_of(2, 599)});  // a decode step
        batches.push_back({index_of(2, 599)});                                   // one long sequence
        batches.push_back({index_of(0, 35), index_of(0, 36), index_of(0, 37), index_of(0, 38), index_of(0, 39),
                           index_of(2, 599)});  // a few tokens of one sequence (speculative)
        batches.emplace_back();
        for (int32_t pos = 0; pos < 100; pos++) batches.back().push_back(index_of(2, pos));  // a prompt
        for (size_t bi = 0; bi < batches.size(); bi++)
          for (ThreadPool* pool : {&pool1, &pool2, &pool4}) {
            SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << name_of(types) << " heads " << sh.n_head << "/"
                                            << sh.n_head_kv << " batch " << bi << " threads " << pool->n_threads());
            const std::vector<int64_t>& idx = batches[bi];
            const auto n = static_cast<int64_t>(idx.size());
            PrepareCase c{&s, {}, {}, std::vector<float>(n * s.ldq),
                          std::vector<std::atomic<int>>(static_cast<size_t>(n * sh.n_head_kv))};
            const std::vector<float> garbage_k(sh.n_head_kv * sh.dk, 7.0f), garbage_v(sh.n_head_kv * sh.dv, -3.0f);
            for (int64_t t = 0; t < n; t++) {
              c.seqs.push_back(s.seq_ids[idx[t]]);
              c.positions.push_back(s.positions[idx[t]]);
              for (int64_t i = 0; i < s.ldq; i++) c.q[t * s.ldq + i] = 2.0f * s.q[idx[t] * s.ldq + i];
              s.kv->write(0, PrepareCase::slot_of(s, c.seqs[t], c.positions[t]), garbage_k.data(), garbage_v.data());
            }
            AttentionBatch b = batch_of(s, c.seqs.data(), c.positions.data(), n);
            b.prepare = {&PrepareCase::run, &c};
            std::vector<float> out(n * s.ldo);
            attention(s.p, b, c.q.data(), s.ldq, out.data(), s.ldo, *pool, isa);
            for (size_t i = 0; i < c.calls.size(); i++) ASSERT_EQ(c.calls[i].load(), 1) << "(token, head) " << i;
            for (int64_t t = 0; t < n; t++)
              for (int64_t i = 0; i < s.p.n_head * s.p.head_dim_v; i++)
                ASSERT_EQ(out[t * s.ldo + i], want[idx[t] * s.ldo + i]) << "token " << t << " elem " << i;
          }
      }
}

TEST(Attention, SoftCap) {
  const auto isas = simd_isas();
  ThreadPool pool(2);
  for (float cap : {1.0f, 50.0f})
    for (const Shape& sh : {Shape{8, 4, 256, 256}, Shape{8, 2, 48, 48}}) {
      SCOPED_TRACE(testing::Message() << "cap " << cap << " dk " << sh.dk);
      AttnCase s = make_setup(sh.n_head, sh.n_head_kv, sh.dk, sh.dv, {GgmlType::F32, GgmlType::F32}, {70, 9}, 21, 32);
      s.p.scale *= 8.0f;  // scores with a standard deviation of ~16: the cap matters
      s.p.softcap = cap;
      const auto want = run(s, Isa::Scalar, pool);
      for (Isa isa : isas) {
        const auto all = run(s, isa, pool);
        expect_match(s, all, want, isa_name(isa), 1e-4);
        std::vector<float> one(s.ldo);
        attention(s.p, batch_of(s, &s.seq_ids[40], &s.positions[40], 1), s.q.data() + 40 * s.ldq, s.ldq, one.data(),
                  s.ldo, pool, isa);
        for (int64_t i = 0; i < s.p.n_head * s.p.head_dim_v; i++) ASSERT_EQ(one[i], all[40 * s.ldo + i]) << i;
      }
      // Token 40's first head by hand: scores capped, masked to its window, softmax, V sum.
      const int64_t t = 40, sq = s.seq_ids[t], pos = s.positions[t], dk = sh.dk;
      std::vector<double> sc;
      for (int64_t j = std::max<int64_t>(0, pos - 31); j <= pos; j++) {
        double d = 0;
        for (int64_t e = 0; e < dk; e++) d += double(s.q[t * s.ldq + e]) * s.k_in[sq][j][e];
        sc.push_back(cap * std::tanh(d * s.p.scale / cap));
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double den = 0;
      for (double& x : sc) den += (x = std::exp(x - mx));
      for (int64_t e = 0; e < 4; e++) {
        double o = 0;
        for (size_t j = 0; j < sc.size(); j++) o += sc[j] / den * s.v_in[sq][std::max<int64_t>(0, pos - 31) + j][e];
        EXPECT_NEAR(want[t * s.ldo + e], o, 1e-4);
      }
    }
}

// A row source standing for a paged cache that has freed the blocks below a window: their
// block-table entries are garbage, and asking for any position below first_valid counts as a
// violation (and hands out NaN rows instead of touching the table).
struct GuardedRows {
  PagedKvSource inner;
  int64_t first_valid = 0;
  const uint8_t* poison = nullptr;
  std::atomic<int>* violations = nullptr;
  static void fetch(const void* ctx, int64_t pos0, int64_t n, int64_t hk, const uint8_t** k_rows, const uint8_t** v_rows) {
    const auto& g = *static_cast<const GuardedRows*>(ctx);
    if (pos0 < g.first_valid) {
      g.violations->fetch_add(1);
      for (int64_t i = 0; i < n; i++) k_rows[i] = v_rows[i] = g.poison;
      return;
    }
    g.inner.rows().fetch(&g.inner, pos0, n, hk, k_rows, v_rows);
  }
};

TEST(Attention, WindowedKernelsNeverFetchBelowTheWindow) {
  ThreadPool pool(2);
  std::vector<Isa> isas = simd_isas();
  isas.push_back(Isa::Scalar);
  const std::vector<uint8_t> poison(1 << 16, 0xff);  // NaN in every type
  for (KvTypes types : {KvTypes{GgmlType::F16, GgmlType::F16}, KvTypes{GgmlType::Q8_0, GgmlType::Q4_0}})
    for (int64_t window : {1, 5, 64, 100}) {
      const std::vector<int64_t> lengths = {300, 150, 77, 5};
      const AttnCase s = make_setup(8, 2, 64, 64, types, lengths, 31, window);
      const int64_t n = static_cast<int64_t>(s.seq_ids.size());
      // Two batches over the guarded cache: every sequence's last position (decode), and the
      // last 40 positions of each (a prefill chunk). Valid from the batch's smallest window start.
      for (int64_t chunk : {1, 40}) {
        std::vector<std::vector<BlockId>> tables = s.tables;
        std::vector<GuardedRows> guards(lengths.size());
        std::vector<KvRows> rows(lengths.size());
        std::atomic<int> violations{0};
        std::vector<int32_t> seqs, pos;
        std::vector<int64_t> index;  // into the full batch
        for (size_t sq = 0; sq < lengths.size(); sq++) {
          const int64_t first_pos = std::max<int64_t>(0, lengths[sq] - chunk);
          GuardedRows& g = guards[sq];
          g.first_valid = std::max<int64_t>(0, first_pos + 1 - window);
          for (int64_t b = 0; (b + 1) * 16 <= g.first_valid; b++) tables[sq][b] = 1 << 28;  // freed
          g.inner = s.kv->source(0, tables[sq]);
          g.poison = poison.data();
          g.violations = &violations;
          rows[sq] = KvRows{GuardedRows::fetch, &g};
          for (int64_t t = 0; t < n; t++)
            if (s.seq_ids[t] == static_cast<int32_t>(sq) && s.positions[t] >= first_pos) {
              seqs.push_back(s.seq_ids[t]);
              pos.push_back(s.positions[t]);
              index.push_back(t);
            }
        }
        std::vector<float> q(index.size() * s.ldq);
        for (size_t i = 0; i < index.size(); i++)
          std::copy_n(&s.q[index[i] * s.ldq], s.ldq, &q[i * s.ldq]);
        for (Isa isa : isas) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << name_of(types) << " window " << window << " chunk " << chunk);
          const auto all = run(s, isa, pool);
          std::vector<float> out(index.size() * s.ldo);
          attention(s.p, batch_of(s, seqs.data(), pos.data(), static_cast<int64_t>(seqs.size()), rows.data()), q.data(),
                    s.ldq, out.data(), s.ldo, pool, isa);
          EXPECT_EQ(violations.load(), 0);
          // And the results are the unguarded full batch's, bit for bit.
          for (size_t i = 0; i < index.size(); i++)
            for (int64_t e = 0; e < s.p.n_head * s.p.head_dim_v; e++)
              ASSERT_EQ(out[i * s.ldo + e], all[index[i] * s.ldo + e]) << "token " << index[i] << " elem " << e;
        }
      }
    }
}

// The tile kernels called directly with queries whose windows start in different blocks: the
// tile fetches nothing below its smallest kv_begin, and each query keeps to its own range.
TEST(Attention, TileFetchesFromItsSmallestWindowStart) {
  AttentionParams p;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim_k = p.head_dim_v = 32;
  p.scale = 0.2f;
  p.k_type = GgmlType::Q8_0;
  p.v_type = GgmlType::F16;
  const AttnCase s = make_setup(4, 2, 32, 32, {p.k_type, p.v_type}, {260}, 41);
  const std::vector<uint8_t> poison(1 << 16, 0xff);
  std::atomic<int> violations{0};
  const std::vector<int64_t> q_rows = {0, 1, 2}, n_kv = {260, 200, 131}, kv_begin = {150, 70, 129};
  GuardedRows g;
  g.first_valid = 70;
  std::vector<BlockId> table = s.tables[0];
  for (int64_t b = 0; (b + 1) * 16 <= g.first_valid; b++) table[b] = 1 << 28;
  g.inner = s.kv->source(0, table);
  g.poison = poison.data();
  g.violations = &violations;
  const KvRows guarded{GuardedRows::fetch, &g};
  std::vector<float> scratch(attention_scratch_floats(p, 3, 260));
  const int64_t width = p.n_head * p.head_dim_v;
  std::vector<float> want(3 * width), got(3 * width), alone(width);
  std::vector<Isa> isas = simd_isas();
  for (int64_t hk = 0; hk < p.n_head_kv; hk++) {
    AttentionQueries qs{s.q.data(), s.ldq, want.data(), width, q_rows.data(), n_kv.data(), kv_begin.data(), 3};
    attention_tile_reference(p, guarded, qs, hk, scratch.data());
    for (Isa isa : isas) {
      qs.out = got.data();
      attention_tile_kernel(isa)(p, guarded, qs, hk, scratch.data());
      for (int64_t r = 0; r < 3; r++) {
        // Alone in its tile, each query gives the same bits.
        AttentionQueries one{s.q.data() + r * s.ldq, s.ldq, alone.data(), width, &q_rows[0], &n_kv[r], &kv_begin[r], 1};
        attention_tile_kernel(isa)(p, guarded, one, hk, scratch.data());
        for (int64_t i = hk * 2 * p.head_dim_v; i < (hk + 1) * 2 * p.head_dim_v; i++) {
          const float a = got[r * width + i], b = want[r * width + i];
          EXPECT_NEAR(a, b, 1e-5 + 1e-5 * std::fabs(b)) << isa_name(isa) << " query " << r << " elem " << i;
          EXPECT_EQ(alone[i], a) << isa_name(isa) << " query " << r << " elem " << i;
        }
      }
    }
  }
  EXPECT_EQ(violations.load(), 0);
}

// A row source that is not one contiguous array: each (position, head) slice in its own heap
// allocation of exactly the stored slice's bytes (so a read past a slice is an ASan error),
// handed out in reverse memory order (a stand-in for a paged cache).
struct ScatteredRows {
  int64_t n_head_kv = 1;
  std::vector<std::vector<uint8_t>> k, v;  // position p, head h: [p * n_head_kv + h]
  static void fetch(const void* ctx, int64_t pos0, int64_t n, int64_t hk, const uint8_t** k_rows, const uint8_t** v_rows) {
    const auto& s = *static_cast<const ScatteredRows*>(ctx);
    for (int64_t i = 0; i < n; i++) {
      k_rows[i] = s.k[(pos0 + i) * s.n_head_kv + hk].data();
      v_rows[i] = s.v[(pos0 + i) * s.n_head_kv + hk].data();
    }
  }
};

// x in type t, as KvStorage stores a row (a partial last block zero-padded).
std::vector<uint8_t> stored_row(GgmlType t, std::vector<float> x) {
  const int64_t bs = type_traits(t).block_size, n = static_cast<int64_t>(x.size());
  x.resize(static_cast<size_t>((n + bs - 1) / bs * bs), 0.0f);
  std::vector<uint8_t> row(kv_row_bytes(t, n));
  type_traits(t).from_float(x.data(), row.data(), static_cast<int64_t>(x.size()));
  return row;
}

TEST(Attention, TileKernelsWithAnyRowSource) {
  for (KvTypes types : kAllTypes)
    for (const Shape& sh : {Shape{4, 2, 20, 12}, Shape{4, 2, 48, 64}, Shape{2, 2, 8, 40}}) {
      SCOPED_TRACE(testing::Message() << name_of(types) << " dims " << sh.dk << "/" << sh.dv);
      AttentionParams p;
      p.n_head = sh.n_head;
      p.n_head_kv = sh.n_head_kv;
      p.head_dim_k = sh.dk;
      p.head_dim_v = sh.dv;
      p.scale = 0.3f;
      p.k_type = types.k;
      p.v_type = types.v;
      const int64_t n_pos = 200;
      std::mt19937 rng(4);
      std::normal_distribution<float> g(0.0f, 1.0f);
      ScatteredRows rows;
      rows.n_head_kv = p.n_head_kv;
      for (int64_t i = n_pos * p.n_head_kv - 1; i >= 0; i--) {  // later positions first in memory
        std::vector<float> k(p.head_dim_k), v(p.head_dim_v);
        for (float& x : k) x = g(rng);
        for (float& x : v) x = g(rng);
        rows.k.push_back(stored_row(types.k, k));
        rows.v.push_back(stored_row(types.v, v));
      }
      std::reverse(rows.k.begin(), rows.k.end());
      std::reverse(rows.v.begin(), rows.v.end());
      const KvRows src{ScatteredRows::fetch, &rows};
      // Three queries at unrelated positions (the kernel needs no consecutive positions).
      const std::vector<int64_t> q_rows = {2, 0, 1}, n_kv = {1, 200, 65};
      std::vector<float> q(3 * p.n_head * p.head_dim_k);
      for (float& x : q) x = g(rng);
      std::vector<float> scratch(attention_scratch_floats(p, 3, n_pos));
      const int64_t width = p.n_head * p.head_dim_v, group = p.n_head / p.n_head_kv;
      std::vector<float> want(3 * width), got(want.size());
      for (int64_t hk = 0; hk < p.n_head_kv; hk++) {
        AttentionQueries qs{q.data(), p.n_head * p.head_dim_k, want.data(), width, q_rows.data(), n_kv.data(), nullptr, 3};
        attention_tile_reference(p, src, qs, hk, scratch.data());
        for (Isa isa : simd_isas()) {
          qs.out = got.data();
          attention_tile_kernel(isa)(p, src, qs, hk, scratch.data());
          for (int64_t r = 0; r < 3; r++)
            for (int64_t i = hk * group * p.head_dim_v; i < (hk + 1) * group * p.head_dim_v; i++) {
              const float a = got[r * width + i], b = want[r * width + i];
              EXPECT_NEAR(a, b, 1e-5 + 1e-5 * std::fabs(b)) << isa_name(isa) << " query " << r << " elem " << i;
            }
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
  AttentionBatch b{&rows, 1, &seq, &pos, 1, {}};
  std::vector<float> q(48), out(48);
  EXPECT_THROW(attention(p, b, q.data(), 48, out.data(), 48, pool, Isa::Scalar), Error);
}

TEST(Attention, RejectsOtherKvTypesByName) {
  AttentionParams p;
  p.n_head = p.n_head_kv = 1;
  p.head_dim_k = p.head_dim_v = 32;
  p.v_type = GgmlType::Q4_1;
  ThreadPool pool(1);
  const int32_t seq = 0, pos = 0;
  const KvRows rows{nullptr, nullptr};
  AttentionBatch b{&rows, 1, &seq, &pos, 1, {}};
  std::vector<float> q(32), out(32);
  try {
    attention(p, b, q.data(), 32, out.data(), 32, pool, Isa::Scalar);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Q4_1"), std::string::npos) << m;
    EXPECT_NE(m.find("q8_0"), std::string::npos) << m;
  }
  std::vector<uint8_t> row(64);
  float f[4];
  EXPECT_THROW(kv_row_to_float(GgmlType::Q4_1, row.data(), 0, 4, f), Error);
}

}  // namespace
}  // namespace lumen
