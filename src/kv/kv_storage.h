// KvStorage: the only code that touches K/V bytes. A block holds the rows of the layers of one
// KV cache group (kv_groups.h: all layers for a model without sliding windows): one arena per
// layer of a group for K and one for V, each n_blocks x block_size slots (a slot: one position's
// KV head slices, each stored as a GGUF-style row of its own of F32, F16, BF16, Q8_0 or Q4_0; K
// and V may differ; where the slices lie: KvArenaMap), mapped once at start-up (pages are
// committed as they are first written). Layer il's rows of block b live in arena
// layer_slot[il]: which group a block serves is the KvCacheManager's business, as is which block
// belongs to whom; KvStorage only writes rows to slots and hands attention a row source over a
// block table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "kernels/attention.h"
#include "kv/block_pool.h"
#include "kv/kv_groups.h"

namespace lumen {

struct KvLayout {
  int64_t n_layer = 0;
  int64_t n_head_kv = 1;
  int64_t kv_dim_k = 0;  // n_head_kv * head_dim_k
  int64_t kv_dim_v = 0;  // n_head_kv * head_dim_v
  GgmlType k_type = GgmlType::F16;
  GgmlType v_type = GgmlType::F16;
  int32_t block_size = 16;
  std::vector<int32_t> layer_window;  // per layer, 0 = global (ModelConfig::layer_window); empty: all global

  KvGroups groups() const { return KvGroups::from_windows(n_layer, layer_window); }

  // One head's slice of one position, and all heads of one position.
  size_t head_bytes_k() const { return kv_row_bytes(k_type, kv_dim_k / n_head_kv); }
  size_t head_bytes_v() const { return kv_row_bytes(v_type, kv_dim_v / n_head_kv); }
  size_t row_bytes_k() const { return static_cast<size_t>(n_head_kv) * head_bytes_k(); }
  size_t row_bytes_v() const { return static_cast<size_t>(n_head_kv) * head_bytes_v(); }
  // K and V bytes of one block: block_size rows of each layer of a group.
  size_t block_bytes() const {
    return static_cast<size_t>(groups().layers_per_group) * block_size * (row_bytes_k() + row_bytes_v());
  }
};

// Where head h's slice of a slot lies in a layer's K or V arena. The arena is cut into spans of
// `span` slots (whole blocks), each span head-major: head 0's slices of the span's slots, then
// head 1's, and so on. Attention reads one head at a time, so over a sequence whose blocks are
// consecutive (the pool hands free blocks out in order) it reads runs of up to `span` slices.
// With the heads of each block side by side, a head's 16 positions were 2 KiB runs 6 KiB apart,
// and TinyLlama's decode attention at 4,096 positions took ~1.5x as long with the same software
// prefetches (what serves long runs better, DRAM pages, the TLB or the hardware prefetchers,
// was not separated). A span holds at most kKvSpanBytes of rows (one huge page), so the first
// tokens commit no more pages than with every block's heads together.
constexpr size_t kKvSpanBytes = size_t{2} << 20;

struct KvArenaMap {
  int64_t n_slots = 0;  // the arena's slots; the last span may be shorter
  int64_t span = 0;     // slots per span, a multiple of the block size
  int64_t n_head = 0;

  // The one map of a layout's K and V arenas (they share slice indices): the most whole blocks
  // whose rows (the larger of K's and V's) fit kKvSpanBytes, at least one block.
  static KvArenaMap of(int64_t n_slots, int32_t block_size, int64_t n_head, size_t row_bytes) {
    const int64_t blocks = static_cast<int64_t>(kKvSpanBytes / (row_bytes * static_cast<size_t>(block_size)));
    return KvArenaMap{n_slots, (blocks > 1 ? blocks : 1) * block_size, n_head};
  }
  // Head h's slice of slot is slice index(slot, h) of the arena: it starts index * head_bytes
  // bytes in (K and V share the index).
  size_t index(int64_t slot, int64_t h) const {
    const int64_t s0 = slot / span * span;
    const int64_t len = span < n_slots - s0 ? span : n_slots - s0;
    return static_cast<size_t>(s0) * static_cast<size_t>(n_head) + static_cast<size_t>(h * len + slot - s0);
  }
  size_t offset(int64_t slot, int64_t h, size_t head_bytes) const { return index(slot, h) * head_bytes; }
};

// The row source attention reads one sequence's K/V through (KvRows::ctx points at it).
struct PagedKvSource {
  const uint8_t* k = nullptr;  // the layer's K arena
  const uint8_t* v = nullptr;
  size_t head_k = 0, head_v = 0;  // bytes of one head slice
  KvArenaMap map;
  const BlockId* table = nullptr;
  int64_t n_blocks = 0;  // entries in table
  int32_t block_size = 0;
  KvRows rows() const;
};

class KvStorage {
 public:
  // K/V types (each): F32, F16, BF16, Q8_0 or Q4_0 (kv_type_supported). Error for anything
  // else, naming it, or for n_blocks < 1.
  KvStorage(const KvLayout& layout, int32_t n_blocks);
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvLayout& layout() const { return layout_; }
  const KvGroups& groups() const { return groups_; }
  int32_t n_blocks() const { return n_blocks_; }
  int64_t n_slots() const { return static_cast<int64_t>(n_blocks_) * layout_.block_size; }
  size_t bytes() const { return bytes_; }

  // Stores the K and V rows (F32, converted to the storage types with the types' from_float)
  // of one position.
  void write(int64_t layer, int64_t slot, const float* k, const float* v);
  // The same for head h alone: k and v are its slices (head_dim_k and head_dim_v floats). A
  // head is stored on its own (a block type's scale never spans two heads), so writing every
  // head this way stores the bytes write() does.
  void write_head(int64_t layer, int64_t slot, int64_t h, const float* k, const float* v);
  // Starts fetching the cache lines write_head() will store to, so that work done before it
  // overlaps their misses: a decode step's slot is one scattered slice per head, which no
  // hardware prefetcher foresees, and the write alone waited for them (Qwen3-MoE decode, F16
  // K/V: ~8.4k cycles (TSC) a layer, ~5k with this).
  void prefetch_write(int64_t layer, int64_t slot, int64_t h) const;
  // Copies rows [0, n_rows) of block src into block dst in every layer slot (copy-on-write).
  void copy_rows(BlockId src, BlockId dst, int32_t n_rows);
  // A row source over `table` (positions p -> slot table[p / B] * B + p % B) for one layer.
  PagedKvSource source(int64_t layer, std::span<const BlockId> table) const;

  // Head h's stored K or V slice of a slot (a stored row of head_dim elements).
  const uint8_t* k_head(int64_t layer, int64_t slot, int64_t h) const {
    return k_layer(layer) + map_.offset(slot, h, layout_.head_bytes_k());
  }
  const uint8_t* v_head(int64_t layer, int64_t slot, int64_t h) const {
    return v_layer(layer) + map_.offset(slot, h, layout_.head_bytes_v());
  }

 private:
  // Arenas by layer slot within a group (0..layers_per_group-1), and by model layer.
  uint8_t* k_base(int64_t layer_slot) const { return arena_ + layer_slot * layer_bytes_; }
  uint8_t* v_base(int64_t layer_slot) const { return k_base(layer_slot) + k_bytes_; }
  uint8_t* k_layer(int64_t layer) const { return k_base(groups_.layer_slot[layer]); }
  uint8_t* v_layer(int64_t layer) const { return v_base(groups_.layer_slot[layer]); }

  KvLayout layout_;
  KvGroups groups_;
  int32_t n_blocks_;
  KvArenaMap map_;
  size_t k_bytes_ = 0, layer_bytes_ = 0, bytes_ = 0;
  uint8_t* arena_ = nullptr;
};

}  // namespace lumen
