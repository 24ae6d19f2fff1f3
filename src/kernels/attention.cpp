// The attention driver (tiles over the thread pool), the scalar reference tile, and the scalar
// dequantization of stored K/V rows that both the reference and the SIMD kernels' fallback use.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant/block_formats.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace lumen {

namespace {

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

}  // namespace

size_t kv_row_bytes(GgmlType type, int64_t n) {
  const TypeTraits& tr = type_traits(type);
  return static_cast<size_t>((n + tr.block_size - 1) / tr.block_size) * tr.type_size;
}

bool kv_type_supported(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: return true;
    default: return false;
  }
}

void kv_row_to_float(GgmlType type, const uint8_t* row, int64_t first, int64_t n, float* out) {
  using quant::BlockQ4_0;
  using quant::BlockQ8_0;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, row + first * 4, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16:
    case GgmlType::BF16: {
      const bool f16 = type == GgmlType::F16;
      for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        std::memcpy(&h, row + (first + i) * 2, 2);
        out[i] = f16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    }
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: {
      // Block by block: the part of [first, first + n) in block b is elements [j0, j1) of it.
      const bool q8 = type == GgmlType::Q8_0;
      const int64_t qk = quant::kQK8_0;  // = kQK4_0
      const size_t bytes = q8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
      for (int64_t i = first; i < first + n;) {
        const int64_t b = i / qk, j0 = i % qk, j1 = std::min<int64_t>(qk, j0 + (first + n - i));
        const uint8_t* blk = row + static_cast<size_t>(b) * bytes;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const float d = fp16_to_fp32(dh);
        const uint8_t* qs = blk + 2;
        float* o = out + (i - first);
        for (int64_t j = j0; j < j1; j++) {
          const int q = q8 ? static_cast<int8_t>(qs[j]) : (j < qk / 2 ? qs[j] & 0x0f : qs[j - qk / 2] >> 4) - 8;
          o[j - j0] = static_cast<float>(q) * d;
        }
        i += j1 - j0;
      }
      return;
    }
    default: break;
  }
  fail("KV cache type {} is not supported (f32, f16, bf16, q8_0 or q4_0)", type_name(type));
}

QueryQ8 attention_query_q8(const float* q, int64_t dk, float* buf) {
  const int64_t nblk = (dk + 31) / 32;
  const QueryQ8 view = attention_q8_view(buf, dk);  // buf is ours to write: its layout
  auto* qs = const_cast<int8_t*>(view.qs);
  auto* d = const_cast<float*>(view.d);
  auto* sum = const_cast<int32_t*>(view.sum);
  float padded[32];
  quant::BlockQ8_0 blk;
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t n = std::min<int64_t>(32, dk - b * 32);
    std::copy(q + b * 32, q + b * 32 + n, padded);
    std::fill(padded + n, padded + 32, 0.0f);
    to_q8_0(padded, &blk, 32);
    d[b] = fp16_to_fp32(blk.d);
    sum[b] = 0;
    for (int i = 0; i < 32; i++) {
      qs[b * 32 + i] = blk.qs[i];
      sum[b] += blk.qs[i];
    }
  }
  return view;
}

namespace {

// The score of a block-type K slice against a query rounded to Q8_0 (kv_k_meets_q8), unscaled.
float score_q8(GgmlType k_type, const uint8_t* k, const QueryQ8& q, int64_t nblk) {
  float s = 0.0f;
  for (int64_t b = 0; b < nblk; b++) {
    const bool q8 = k_type == GgmlType::Q8_0;
    const uint8_t* blk = k + b * (q8 ? sizeof(quant::BlockQ8_0) : sizeof(quant::BlockQ4_0));
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    int32_t dot = 0;
    for (int i = 0; i < 32; i++) {
      const int kq = q8 ? static_cast<int8_t>(blk[2 + i]) : (i < 16 ? blk[2 + i] & 0x0f : blk[2 + i - 16] >> 4) - 8;
      dot += kq * q.qs[b * 32 + i];
    }
    s += static_cast<float>(dot) * (fp16_to_fp32(dh) * q.d[b]);
  }
  return s;
}

}  // namespace

size_t attention_scratch_floats(const AttentionParams& p, int64_t n_q, int64_t max_kv) {
  const int64_t group = p.n_head / p.n_head_kv;
  const int64_t rows = n_q * group;
  const int64_t dk = round16(p.head_dim_k), dv = round16(p.head_dim_v);
  // SIMD tiles: per query row its output accumulator, max and sum, for the current span and the
  // spans before, and its query rounded to Q8_0 (a block-type K; dk floats hold it); one key
  // block staged (K, V); the block's probabilities for up to 4 rows; 4 x 64 row pointers (2
  // floats each); alignment slack.
  const int64_t simd = 2 * (rows * dv + 2 * round16(rows)) + rows * dk + kAttentionKeyBlock * (dk + dv) +
                       4 * kAttentionKeyBlock + 4 * kAttentionKeyBlock * 2 + 64;
  // Reference: every score of one query row, its output row, one K and one V row as floats, the
  // query rounded to Q8_0, 2 x 64 row pointers.
  const int64_t ref = round16(max_kv) + 2 * dv + 2 * dk + 2 * kAttentionKeyBlock * 2 + 64;
  return static_cast<size_t>(std::max(simd, ref));
}

// One query head at a time, exactly as the model's original loop: float dot products in index
// order (a block-type K: score_q8 against the query rounded to Q8_0), the reference two-pass
// softmax (sum in double) over the query's keys [kv_begin, n_kv), then the
// probability-weighted sum of V rows in position order. Rows are dequantized with
// kv_row_to_float, the definition the SIMD kernels must reproduce.
void attention_tile_reference(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                              float* scratch) {
  const int64_t group = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = p.head_dim_v;
  int64_t max_kv = 0;
  for (int64_t i = 0; i < qs.n_q; i++) max_kv = std::max(max_kv, qs.n_kv[i]);
  float* scores = scratch;
  float* tmp = scores + round16(max_kv);
  float* kf = tmp + round16(dv);  // one K row's head slice as floats
  float* vf = kf + round16(dk);   // one V row's
  float* qbuf = vf + round16(dv);  // the query rounded to Q8_0
  auto** k_rows = reinterpret_cast<const uint8_t**>(qbuf + round16(dk));
  const uint8_t** v_rows = k_rows + kAttentionKeyBlock;
  const bool q8 = kv_k_meets_q8(p.k_type);
  const int64_t nblk = (dk + 31) / 32;
  for (int64_t qi = 0; qi < qs.n_q; qi++) {
    const int64_t n_kv = qs.n_kv[qi], begin = qs.kv_begin ? qs.kv_begin[qi] : 0;
    LUMEN_ASSERT(begin >= 0 && begin < n_kv);
    for (int64_t g = 0; g < group; g++) {
      const int64_t h = hk * group + g;
      const float* q = qs.q + qs.rows[qi] * qs.ldq + h * dk;
      const QueryQ8 qq = q8 ? attention_query_q8(q, dk, qbuf) : QueryQ8{};
      for (int64_t j0 = begin; j0 < n_kv; j0 += kAttentionKeyBlock) {
        const int64_t nb = std::min(kAttentionKeyBlock, n_kv - j0);
        kv.fetch(kv.ctx, j0, nb, hk, k_rows, v_rows);
        for (int64_t j = 0; j < nb; j++) {
          float s = 0.0f;
          if (q8) {
            s = score_q8(p.k_type, k_rows[j], qq, nblk);
          } else {
            kv_row_to_float(p.k_type, k_rows[j], 0, dk, kf);
            for (int64_t i = 0; i < dk; i++) s += q[i] * kf[i];
          }
          s *= p.scale;
          if (p.softcap > 0.0f) s = p.softcap * std::tanh(s * (1.0f / p.softcap));
          scores[j0 - begin + j] = s;
        }
      }
      ref::softmax(scores, n_kv - begin);
      std::fill(tmp, tmp + dv, 0.0f);
      for (int64_t j0 = begin; j0 < n_kv; j0 += kAttentionKeyBlock) {
        const int64_t nb = std::min(kAttentionKeyBlock, n_kv - j0);
        kv.fetch(kv.ctx, j0, nb, hk, k_rows, v_rows);
        for (int64_t j = 0; j < nb; j++) {
          kv_row_to_float(p.v_type, v_rows[j], 0, dv, vf);
          const float pj = scores[j0 - begin + j];
          for (int64_t i = 0; i < dv; i++) tmp[i] += pj * vf[i];
        }
      }
      std::copy(tmp, tmp + dv, qs.out + qs.rows[qi] * qs.ldo + h * dv);
    }
  }
}

AttentionTileFn attention_tile_kernel(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return kAttentionAvx512.tile;
    case Isa::Avx2: return kAttentionAvx2.tile;
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
  int64_t span;          // keys the tile walks: max_kv less its smallest kv_begin
  int64_t key_lo = 0, key_hi = INT64_MAX;  // one span of a split (AttentionQueries)
  int64_t partial = -1;                    // and the offset of its states in DriverState::partial
};

// The spans of one split tile, merged after every span has run.
struct Merge {
  int64_t seq, hk, first, count;
  int64_t partial, n_spans;
};
constexpr int64_t kMaxPartialFloats = int64_t{4} << 20;

// Per calling thread: reused across layers and calls, so nothing is allocated per token once
// the shapes have been seen.
struct DriverState {
  std::vector<int64_t> order, n_kv;       // batch indices grouped by sequence; their key counts
  std::vector<int64_t> kv_begin;          // and their first keys (window)
  std::vector<int64_t> seq_start;         // per batch sequence: offset into order (n_seq + 1)
  std::vector<int64_t> seq_of;            // per batch sequence: fill cursor of the counting sort
  std::vector<Tile> tiles;
  std::vector<Merge> merges;
  std::vector<float> partial;              // the split spans' row states
  std::vector<std::vector<float>> scratch;  // per pool thread
};

// DriverState::partial from its first 64-byte boundary (the tiles store whole vectors).
float* aligned_partial(DriverState& st) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(st.partial.data()) + 63) & ~uintptr_t{63});
}

}  // namespace

void attention(const AttentionParams& p, const AttentionBatch& batch, const float* q, int64_t ldq, float* out,
               int64_t ldo, ThreadPool& pool, Isa isa) {
  if (p.n_head_kv < 1 || p.n_head % p.n_head_kv != 0) fail("attention: {} heads do not group over {} KV heads", p.n_head, p.n_head_kv);
  for (GgmlType t : {p.k_type, p.v_type})
    if (!kv_type_supported(t)) fail("attention: KV cache type {} is not supported (f32, f16, bf16, q8_0 or q4_0)", type_name(t));
  if (p.window < 0) fail("attention: negative window {}", p.window);
  if (!(p.softcap >= 0.0f)) fail("attention: invalid soft-cap {}", p.softcap);
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
  st.kv_begin.resize(st.order.size());
  for (size_t i = 0; i < st.order.size(); i++) {
    st.n_kv[i] = batch.positions[st.order[i]] + 1;  // causal
    st.kv_begin[i] = p.window > 0 ? std::max<int64_t>(0, st.n_kv[i] - p.window) : 0;
  }

  // Tiles of consecutive queries of one sequence x one KV head: about 128 query rows, so a K/V
  // block is reused by many rows; the reference works one query at a time. Longer tiles (more
  // keys: later positions, or a wider part of a window) first, so the thread claiming the last
  // ones finishes soon after the others.
  const int64_t tile_tokens = kernel == attention_tile_reference ? 1 : std::clamp<int64_t>(128 / group, 1, 32);
  st.tiles.clear();
  for (size_t si = 0; si + 1 < st.seq_start.size(); si++) {
    const int64_t b = st.seq_start[si], e = st.seq_start[si + 1];
    if (b == e) continue;
    for (int64_t first = b; first < e; first += tile_tokens) {
      const int64_t count = std::min(tile_tokens, e - first);
      int64_t max_kv = 0, min_begin = INT64_MAX;
      for (int64_t i = first; i < first + count; i++) {
        max_kv = std::max(max_kv, st.n_kv[i]);
        min_begin = std::min(min_begin, st.kv_begin[i]);
      }
      for (int64_t hk = 0; hk < p.n_head_kv; hk++)
        st.tiles.push_back(Tile{static_cast<int64_t>(si), hk, first, count, max_kv, max_kv - min_begin});
    }
  }
  // Fewer tiles than threads (a decode of few sequences, one tile per KV head, on many cores;
  // one KV head on any) leave threads idle: the tiles' spans are cut into pieces of
  // consecutive spans, each a tile of its own, whose span states are merged afterwards (the
  // same bits as one tile walking them all). About two pieces per thread: each piece starts
  // with a block nothing prefetched (~6 us per piece; measured on 2 threads, 3 KV heads at
  // 4,096 keys did no better split than unbalanced). The reference walks every key of a query
  // in one pass and is never split.
  st.merges.clear();
  const int64_t want = 2 * pool.n_threads(), n_tiles = static_cast<int64_t>(st.tiles.size());
  if (kernel != attention_tile_reference && n_tiles < pool.n_threads()) {
    const int64_t stride = attention_partial_floats(p), per_tile = (want + n_tiles - 1) / n_tiles;
    int64_t floats = 0;
    for (int64_t ti = 0; ti < n_tiles; ti++) {
      const Tile t = st.tiles[ti];
      const int64_t s_lo = (t.max_kv - t.span) / kAttentionSpan, n_spans = (t.max_kv - 1) / kAttentionSpan - s_lo + 1;
      const int64_t pieces = std::min(per_tile, n_spans), n_rows = t.count * group;
      // Span states of a long prefill tile on a many-core machine add up (rows x spans): past
      // 16 MiB per call the remaining tiles stay whole.
      if (pieces < 2 || floats + n_spans * n_rows * stride > kMaxPartialFloats) continue;
      st.merges.push_back(Merge{t.seq, t.hk, t.first, t.count, floats, n_spans});
      for (int64_t k = 0; k < pieces; k++) {
        const int64_t a = s_lo + k * n_spans / pieces, b = s_lo + (k + 1) * n_spans / pieces;  // spans [a, b)
        Tile part = t;
        part.key_lo = a * kAttentionSpan;
        part.key_hi = b * kAttentionSpan;
        part.span = std::min(t.max_kv, part.key_hi) - std::max(t.max_kv - t.span, part.key_lo);
        part.partial = floats + (a - s_lo) * n_rows * stride;
        if (k == 0) st.tiles[ti] = part;
        else st.tiles.push_back(part);
      }
      floats += n_spans * n_rows * stride;
    }
    if (st.partial.size() < static_cast<size_t>(floats + 16)) st.partial.resize(static_cast<size_t>(floats + 16));
  }
  // Ties keep their creation order (first, hk): the order stable_sort would give, without the
  // temporary buffer it allocates on every call (this runs per layer per token).
  std::sort(st.tiles.begin(), st.tiles.end(), [](const Tile& a, const Tile& b) {
    if (a.span != b.span) return a.span > b.span;
    if (a.first != b.first) return a.first < b.first;
    return a.hk != b.hk ? a.hk < b.hk : a.key_lo < b.key_lo;
  });

  // The batch's own tokens prepared inside their tiles when a tile holds all of its
  // sequence's and none is split (AttentionPrepare); otherwise all of them first.
  const AttentionPrepare prep = batch.prepare;
  bool prep_in_tiles = prep.fn != nullptr && st.merges.empty();
  for (size_t si = 0; prep_in_tiles && si + 1 < st.seq_start.size(); si++)
    prep_in_tiles = st.seq_start[si + 1] - st.seq_start[si] <= tile_tokens;
  if (prep.fn != nullptr && !prep_in_tiles)
    pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; t++)
        for (int64_t hk = 0; hk < p.n_head_kv; hk++) prep.fn(prep.ctx, t, hk);
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
      if (prep_in_tiles)
        for (int64_t j = t.first; j < t.first + t.count; j++) prep.fn(prep.ctx, st.order[j], t.hk);
      const KvRows& rows = batch.seq_rows[t.seq];
      AttentionQueries qs;
      qs.q = q;
      qs.ldq = ldq;
      qs.out = out;
      qs.ldo = ldo;
      qs.rows = &st.order[t.first];
      qs.n_kv = &st.n_kv[t.first];
      qs.kv_begin = &st.kv_begin[t.first];
      qs.n_q = t.count;
      qs.key_lo = t.key_lo;
      qs.key_hi = t.key_hi;
      qs.partial = t.partial >= 0 ? aligned_partial(st) + t.partial : nullptr;
      kernel(p, rows, qs, t.hk, st.scratch[thread].data());
    }
  });
  if (st.merges.empty()) return;
  const AttentionMergeFn merge = isa == Isa::Avx512 ? kAttentionAvx512.merge : kAttentionAvx2.merge;
  pool.parallel_for(static_cast<int64_t>(st.merges.size()), 1, [&](int64_t b, int64_t e, int thread) {
    for (int64_t i = b; i < e; i++) {
      const Merge& m = st.merges[i];
      AttentionQueries qs;
      qs.out = out;
      qs.ldo = ldo;
      qs.rows = &st.order[m.first];
      qs.n_q = m.count;
      merge(p, qs, m.hk, aligned_partial(st) + m.partial, m.n_spans, st.scratch[thread].data());
    }
  });
}

}  // namespace lumen
