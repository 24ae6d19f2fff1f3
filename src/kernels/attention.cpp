// The attention driver (tiles over the thread pool) and the scalar reference tile.
#include "kernels/attention.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/ref/ops_ref.h"

namespace lumen {

namespace {

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

}  // namespace

size_t attention_scratch_floats(const AttentionParams& p, int64_t n_q, int64_t max_kv) {
  const int64_t group = p.n_head / p.n_head_kv;
  const int64_t rows = n_q * group;
  const int64_t dk = round16(p.head_dim_k), dv = round16(p.head_dim_v);
  // SIMD tiles: per query row its output accumulator, max and sum; one key block widened to
  // F32; the block's probabilities for up to 4 rows; 4 x 64 row pointers (2 floats each);
  // alignment slack.
  const int64_t simd = rows * dv + 2 * round16(rows) + kAttentionKeyBlock * (dk + dv) + 4 * kAttentionKeyBlock +
                       4 * kAttentionKeyBlock * 2 + 64;
  // Reference: every score of one query row, its output row, 2 x 64 row pointers.
  const int64_t ref = round16(max_kv) + dv + 2 * kAttentionKeyBlock * 2 + 64;
  return static_cast<size_t>(std::max(simd, ref));
}

// One query head at a time, exactly as the model's original loop: float dot products in index
// order, the reference two-pass softmax (sum in double), then the probability-weighted sum of
// V rows in position order.
void attention_tile_reference(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                              float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = p.head_dim_v;
  const bool f16 = p.kv_type == GgmlType::F16;
  const size_t esize = f16 ? 2 : 4;
  int64_t max_kv = 0;
  for (int64_t i = 0; i < qs.n_q; i++) max_kv = std::max(max_kv, qs.n_kv[i]);
  float* scores = scratch;
  float* tmp = scores + round16(max_kv);
  auto** k_rows = reinterpret_cast<const uint8_t**>(tmp + round16(dv));
  const uint8_t** v_rows = k_rows + kAttentionKeyBlock;
  auto elem = [f16](const uint8_t* row, int64_t i) {
    return f16 ? fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]) : reinterpret_cast<const float*>(row)[i];
  };
  for (int64_t qi = 0; qi < qs.n_q; qi++) {
    const int64_t n_kv = qs.n_kv[qi];
    for (int64_t g = 0; g < group; g++) {
      const int64_t h = hk * group + g;
      const float* q = qs.q + qs.rows[qi] * qs.ldq + h * dk;
      for (int64_t j0 = 0; j0 < n_kv; j0 += kAttentionKeyBlock) {
        const int64_t nb = std::min(kAttentionKeyBlock, n_kv - j0);
        kv.fetch(kv.ctx, j0, nb, k_rows, v_rows);
        for (int64_t j = 0; j < nb; j++) {
          const uint8_t* kr = k_rows[j] + static_cast<size_t>(hk * dk) * esize;
          float s = 0.0f;
          for (int64_t i = 0; i < dk; i++) s += q[i] * elem(kr, i);
          scores[j0 + j] = s * p.scale;
        }
      }
      ref::softmax(scores, n_kv);
      std::fill(tmp, tmp + dv, 0.0f);
      for (int64_t j0 = 0; j0 < n_kv; j0 += kAttentionKeyBlock) {
        const int64_t nb = std::min(kAttentionKeyBlock, n_kv - j0);
        kv.fetch(kv.ctx, j0, nb, k_rows, v_rows);
        for (int64_t j = 0; j < nb; j++) {
          const uint8_t* vr = v_rows[j] + static_cast<size_t>(hk * dv) * esize;
          const float pj = scores[j0 + j];
          for (int64_t i = 0; i < dv; i++) tmp[i] += pj * elem(vr, i);
        }
      }
      std::copy(tmp, tmp + dv, qs.out + qs.rows[qi] * qs.ldo + h * dv);
    }
  }
}

AttentionTileFn attention_tile_kernel(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return attention_tile_avx512;
    case Isa::Avx2: return attention_tile_avx2;
    case Isa::Scalar: break;
  }
  return attention_tile_reference;
}

namespace {

struct Tile {
  int64_t seq;
  int64_t hk;
  int64_t first, count;  // range in the sequence's token list
  int64_t max_kv;
};

// Per calling thread: reused across layers and calls, so nothing is allocated per token once
// the shapes have been seen.
struct DriverState {
  std::vector<int64_t> order, n_kv;       // batch indices grouped by sequence; their key counts
  std::vector<int64_t> seq_start;         // per batch sequence: offset into order (n_seq + 1)
  std::vector<int64_t> seq_of;            // per batch sequence: fill cursor of the counting sort
  std::vector<Tile> tiles;
  std::vector<std::vector<float>> scratch;  // per pool thread
};

}  // namespace

void attention(const AttentionParams& p, const AttentionBatch& batch, const float* q, int64_t ldq, float* out,
               int64_t ldo, ThreadPool& pool, Isa isa) {
  if (p.n_head_kv < 1 || p.n_head % p.n_head_kv != 0) fail("attention: {} heads do not group over {} KV heads", p.n_head, p.n_head_kv);
  thread_local DriverState caller_state;
  DriverState& st = caller_state;  // the workers below must see the caller's, not their own
  const AttentionTileFn kernel = attention_tile_kernel(isa);
  const int64_t group = p.n_head / p.n_head_kv;
  const int64_t n_tokens = batch.n_tokens;

  // Tokens by sequence (a counting sort: O(tokens + sequences)), each sequence's in batch
  // order (= position order).
  st.seq_start.assign(static_cast<size_t>(batch.n_seq) + 1, 0);
  for (int64_t t = 0; t < n_tokens; t++) {
    LUMEN_ASSERT(batch.seq[t] >= 0 && batch.seq[t] < batch.n_seq);
    st.seq_start[batch.seq[t] + 1]++;
  }
  for (int64_t s = 0; s < batch.n_seq; s++) st.seq_start[s + 1] += st.seq_start[s];
  st.order.resize(static_cast<size_t>(n_tokens));
  st.seq_of.assign(st.seq_start.begin(), st.seq_start.end() - 1);  // fill cursors
  for (int64_t t = 0; t < n_tokens; t++) st.order[st.seq_of[batch.seq[t]]++] = t;
  st.n_kv.resize(st.order.size());
  for (size_t i = 0; i < st.order.size(); i++) st.n_kv[i] = batch.positions[st.order[i]] + 1;  // causal

  // Tiles of consecutive queries of one sequence x one KV head: about 128 query rows, so a K/V
  // block is reused by many rows; the reference works one query at a time. Later (longer)
  // tiles first, so the thread claiming the last ones finishes soon after the others.
  const int64_t tile_tokens = kernel == attention_tile_reference ? 1 : std::clamp<int64_t>(128 / group, 1, 32);
  st.tiles.clear();
  for (size_t si = 0; si + 1 < st.seq_start.size(); si++) {
    const int64_t b = st.seq_start[si], e = st.seq_start[si + 1];
    if (b == e) continue;
    for (int64_t first = b; first < e; first += tile_tokens) {
      const int64_t count = std::min(tile_tokens, e - first);
      int64_t max_kv = 0;
      for (int64_t i = first; i < first + count; i++) max_kv = std::max(max_kv, st.n_kv[i]);
      for (int64_t hk = 0; hk < p.n_head_kv; hk++) st.tiles.push_back(Tile{static_cast<int64_t>(si), hk, first, count, max_kv});
    }
  }
  // Ties keep their creation order (first, hk): the order stable_sort would give, without the
  // temporary buffer it allocates on every call (this runs per layer per token).
  std::sort(st.tiles.begin(), st.tiles.end(), [](const Tile& a, const Tile& b) {
    if (a.max_kv != b.max_kv) return a.max_kv > b.max_kv;
    return a.first != b.first ? a.first < b.first : a.hk < b.hk;
  });

  int64_t max_kv = 0;
  for (const Tile& t : st.tiles) max_kv = std::max(max_kv, t.max_kv);
  const size_t need = attention_scratch_floats(p, tile_tokens, max_kv);
  st.scratch.resize(pool.n_threads());
  for (auto& s : st.scratch)
    if (s.size() < need) s.resize(need);

  pool.parallel_for(static_cast<int64_t>(st.tiles.size()), 1, [&](int64_t b, int64_t e, int thread) {
    for (int64_t i = b; i < e; i++) {
      const Tile& t = st.tiles[i];
      const KvRows& rows = batch.seq_rows[t.seq];
      AttentionQueries qs;
      qs.q = q;
      qs.ldq = ldq;
      qs.out = out;
      qs.ldo = ldo;
      qs.rows = &st.order[t.first];
      qs.n_kv = &st.n_kv[t.first];
      qs.n_q = t.count;
      kernel(p, rows, qs, t.hk, st.scratch[thread].data());
    }
  });
}

}  // namespace lumen
