// Causal grouped-query attention over a KV cache, optionally over a sliding window. The unit of
// work is a tile: some queries of one sequence and the query heads that share one KV head. The
// SIMD kernels walk the keys in blocks of kAttentionKeyBlock positions (aligned to multiples of
// it from position 0) with an online softmax (flash-attention style): each K/V row is fetched
// and staged once per tile (dequantized to F32; a block-type K as int8, kv_k_meets_q8) and used
// by every query row of it, so decode (one query,
// all heads of a group) and prefill (many queries) share one kernel, and a query's result does
// not depend on what else is in the tile. The scalar reference (one query head at a time,
// two-pass softmax) is what LUMEN_ISA=scalar runs and what the kernels are tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace lumen {

class ThreadPool;

constexpr int64_t kAttentionKeyBlock = 64;
// Keys are also grouped in spans of kAttentionSpan positions (aligned to multiples of it from
// position 0), each with its own softmax state, folded in span order (flash-decoding's split):
// a long decode's spans can then run on several threads, one KV head no longer bounding its
// parallelism, with the same bits as one tile walking them all.
constexpr int64_t kAttentionSpan = 512;

struct AttentionParams {
  int64_t n_head = 0;     // query heads; a multiple of n_head_kv
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;  // of queries and keys
  int64_t head_dim_v = 0;  // of values and outputs
  float scale = 1.0f;      // applied to q.k before the softmax
  // > 0: each scaled score s becomes softcap * tanh(s / softcap) before the mask and the softmax
  // (Gemma 2's attention soft-capping; s * (1 / softcap) as ggml computes it). 0: off.
  float softcap = 0.0f;
  // Element types of the K and V head slices, each one of F32, F16, BF16, Q8_0, Q4_0 (a slice
  // of a block type is ceil(head_dim / 32) blocks, the last one zero-padded).
  GgmlType k_type = GgmlType::F32;
  GgmlType v_type = GgmlType::F32;
  // 0: the token at position p attends to [0, p]; W > 0: a sliding window, [max(0, p-W+1), p]
  // (W positions including itself, as llama.cpp's standard SWA).
  int64_t window = 0;
};

// The five K/V element types the kernels read.
bool kv_type_supported(GgmlType type);

// A block-type K (Q8_0, Q4_0) meets each query head's row rounded to Q8_0, as llama.cpp's CPU
// attention does for those caches (Q converted to K's vec_dot type): a score is the sum over
// 32-element blocks, in block order, of float(sum_i k_i q_i) * (d_k * d_q), the integer dot
// exact. Element-type K (F32, F16, BF16) meets the query's floats as they are.
inline bool kv_k_meets_q8(GgmlType k_type) { return k_type == GgmlType::Q8_0 || k_type == GgmlType::Q4_0; }

// A query head's row of dk floats rounded to Q8_0 (kernels/ops.h's to_q8_0 of the row
// zero-padded to whole blocks), unpacked for the kernels: the nblk = ceil(dk / 32) blocks'
// quants (32 int8 each), scales as floats and sums of quants. It takes 10 floats per block
// (4-byte aligned), at most round16(dk).
struct QueryQ8 {
  const int8_t* qs;
  const float* d;
  const int32_t* sum;
};
QueryQ8 attention_query_q8(const float* q, int64_t dk, float* buf);
// Where attention_query_q8 lays the rounding out in buf (the one definition of that layout).
inline QueryQ8 attention_q8_view(const float* buf, int64_t dk) {
  const int64_t nblk = (dk + 31) / 32;
  return QueryQ8{reinterpret_cast<const int8_t*>(buf), buf + nblk * 8, reinterpret_cast<const int32_t*>(buf + nblk * 9)};
}

// Bytes of one stored K or V head slice of n elements. A block type's last block is zero-padded
// when n is not a multiple of its 32 elements: ceil(n / 32) blocks (each head is quantized on
// its own: a scale never spans two heads). The KV storage, `lumen plan` and the roofline report
// size the cache with this; the SIMD tiles prefetch slices of this size.
size_t kv_row_bytes(GgmlType type, int64_t n);

// Elements [first, first + n) of one stored K or V row of `type` as floats, exactly as the
// type's reference to_float gives them (Q8_0: d * q, Q4_0: d * (q - 8), one float multiply).
// The range may start and end inside a 32-element block. Error for an unsupported type.
void kv_row_to_float(GgmlType type, const uint8_t* row, int64_t first, int64_t n, float* out);

// Where the K and V of one (layer, sequence) live. Kernels ask for KV head hk's slices of
// positions [pos0, pos0 + n), n <= kAttentionKeyBlock, one block at a time: per position a
// pointer to that head's K (head_dim_k elements) and V (head_dim_v) of the element types, each
// slice a stored row of its own: a block type's slice is whole blocks, the last one padded with
// zeros (the SIMD stagers read whole chunks of it, padding included). Any storage that can
// answer per (position, head) fits (kv/kv_storage.h: a paged cache through a block table, head
// slices of a block contiguous per head).
// The contract with a windowed cache: a kernel never asks for a position below the smallest
// kv_begin of its tile's queries. A paged cache frees the blocks that fall out of the window, so
// their block-table entries are invalid and must not be read. Keys a kernel did not fetch, or
// that lie below a query's own kv_begin, are masked (score -inf, probability 0).
struct KvRows {
  void (*fetch)(const void* ctx, int64_t pos0, int64_t n, int64_t hk, const uint8_t** k_rows, const uint8_t** v_rows);
  const void* ctx;
};

// The queries of a tile. Query i reads its row q + rows[i] * ldq (all n_head heads,
// head_dim_k floats each), attends to keys [kv_begin[i], n_kv[i]) (kv_begin[i] < n_kv[i];
// kv_begin nullptr: every kv_begin is 0) and writes its heads of the group into
// out + rows[i] * ldo (n_head heads of head_dim_v floats each).
struct AttentionQueries {
  const float* q = nullptr;
  int64_t ldq = 0;
  float* out = nullptr;
  int64_t ldo = 0;
  const int64_t* rows = nullptr;
  const int64_t* n_kv = nullptr;
  const int64_t* kv_begin = nullptr;
  int64_t n_q = 0;
  // A piece of a span split (attention()): the tile walks only keys [key_lo, key_hi) (whole
  // spans) and writes each span's unnormalised state of each row, instead of out, to partial +
  // (span * rows + row) * attention_partial_floats(p) (span counted from key_lo; row: query
  // i's head g of the group at i * group + g).
  int64_t key_lo = 0, key_hi = INT64_MAX;
  float* partial = nullptr;
};

// Floats of one row's span state: its output accumulator (round16(head_dim_v)), max, sum and
// whether the span held any of its keys (padded to 16).
inline int64_t attention_partial_floats(const AttentionParams& p) { return (p.head_dim_v + 15) / 16 * 16 + 16; }

// One tile: the queries' heads of KV head hk's group. scratch holds
// attention_scratch_floats(p, n_q, max_kv) floats (any alignment; max_kv = the largest n_kv).
using AttentionTileFn = void (*)(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                                 float* scratch);
size_t attention_scratch_floats(const AttentionParams& p, int64_t n_q, int64_t max_kv);

void attention_tile_reference(const AttentionParams& p, const KvRows& kv, const AttentionQueries& qs, int64_t hk,
                              float* scratch);
AttentionTileFn attention_tile_kernel(Isa isa);  // the reference for Isa::Scalar

// The merge of a span split: `partials` holds n_spans states (span-major) of every row of the
// queries, as the split's tiles wrote them; folds them in span order exactly as one tile walking
// every span would and writes the outputs. scratch: attention_partial_floats(p) + 16 floats.
using AttentionMergeFn = void (*)(const AttentionParams& p, const AttentionQueries& qs, int64_t hk,
                                  const float* partials, int64_t n_spans, float* scratch);

// An ISA's tile and merge: kernels/generic/attention_tile.h instantiated by
// kernels/avx2/attention_avx2.cpp and kernels/avx512/attention_avx512.cpp.
struct AttentionKernels {
  AttentionTileFn tile;
  AttentionMergeFn merge;
};
extern const AttentionKernels kAttentionAvx2, kAttentionAvx512;

// Work attention() runs on the batch's own tokens before it reads them: fn(ctx, t, hk) makes
// token t's query heads of KV head hk's group and its K/V of head hk ready (a model's biases,
// Q/K norms and rotation, and the KV-cache write of that head). Where each sequence's tokens
// fall in one tile per KV head and no tile is split (a decode step), a tile prepares its own
// tokens' heads on the thread that then attends, so the heads are prepared in parallel inside
// the attention job instead of serially before it; otherwise (a prompt over several tiles,
// whose later tiles read the keys of earlier ones; a split tile) every (t, hk) is prepared
// before any tile runs. Either way fn runs once per (t, hk), and with the same bits.
struct AttentionPrepare {
  void (*fn)(const void* ctx, int64_t token, int64_t hk) = nullptr;
  const void* ctx = nullptr;
};

// The sequences and queries of one layer's attention over a batch: token t (of sequence
// seq[t], at positions[t]) attends to its sequence's positions [0, positions[t]] (with a
// window W: [max(0, positions[t] - W + 1), positions[t]]), whose K/V rows seq_rows[seq[t]]
// must hold once `prepare` (if any) has run for t.
struct AttentionBatch {
  const KvRows* seq_rows = nullptr;  // one row source per sequence
  int64_t n_seq = 0;
  const int32_t* seq = nullptr;      // per token: index into seq_rows
  const int32_t* positions = nullptr;
  int64_t n_tokens = 0;
  AttentionPrepare prepare;          // optional
};

// q rows are ldq floats apart, out rows ldo. Tiles run on the pool with the kernel of `isa`.
// Error for heads that do not group, an unsupported K/V type or a negative window.
void attention(const AttentionParams& p, const AttentionBatch& batch, const float* q, int64_t ldq, float* out,
               int64_t ldo, ThreadPool& pool, Isa isa);

}  // namespace lumen
