// KvStorage: the only code that touches K/V bytes. One arena per layer for K and one for V,
// each n_blocks x block_size rows (a row: all KV heads of one position, stored as one GGUF-style
// row of F32, F16, BF16, Q8_0 or Q4_0; K and V may differ), mapped once
// at start-up (pages are committed as they are first written). Which block belongs to whom is
// the KvCacheManager's business; KvStorage only writes rows to slots and hands attention a row
// source over a block table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/dtype.h"
#include "kernels/attention.h"
#include "kv/block_pool.h"

namespace lumen {

// Bytes of one stored K or V row of n elements. A block type's last block is zero-padded when n
// is not a multiple of its 32 elements: ceil(n / 32) blocks. `lumen plan` and the roofline
// report size the cache with this too.
size_t kv_row_bytes(GgmlType type, int64_t n);

struct KvLayout {
  int64_t n_layer = 0;
  int64_t kv_dim_k = 0;  // n_head_kv * head_dim_k
  int64_t kv_dim_v = 0;  // n_head_kv * head_dim_v
  GgmlType k_type = GgmlType::F16;
  GgmlType v_type = GgmlType::F16;
  int32_t block_size = 16;

  size_t row_bytes_k() const { return kv_row_bytes(k_type, kv_dim_k); }
  size_t row_bytes_v() const { return kv_row_bytes(v_type, kv_dim_v); }
  // K and V bytes of one block over all layers.
  size_t block_bytes() const { return static_cast<size_t>(n_layer) * block_size * (row_bytes_k() + row_bytes_v()); }
};

// The row source attention reads one sequence's K/V through (KvRows::ctx points at it).
struct PagedKvSource {
  const uint8_t* k = nullptr;  // the layer's K arena
  const uint8_t* v = nullptr;
  size_t row_k = 0, row_v = 0;
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
  int32_t n_blocks() const { return n_blocks_; }
  int64_t n_slots() const { return static_cast<int64_t>(n_blocks_) * layout_.block_size; }
  size_t bytes() const { return bytes_; }

  // Stores the K and V rows (F32, converted to the storage types with the types' from_float)
  // of one position.
  void write(int64_t layer, int64_t slot, const float* k, const float* v);
  // Copies rows [0, n_rows) of block src into block dst in every layer (copy-on-write).
  void copy_rows(BlockId src, BlockId dst, int32_t n_rows);
  // A row source over `table` (positions p -> slot table[p / B] * B + p % B) for one layer.
  PagedKvSource source(int64_t layer, std::span<const BlockId> table) const;

  const uint8_t* k_row(int64_t layer, int64_t slot) const { return k_base(layer) + slot * layout_.row_bytes_k(); }
  const uint8_t* v_row(int64_t layer, int64_t slot) const { return v_base(layer) + slot * layout_.row_bytes_v(); }

 private:
  uint8_t* k_base(int64_t layer) const { return arena_ + layer * layer_bytes_; }
  uint8_t* v_base(int64_t layer) const { return k_base(layer) + k_bytes_; }

  KvLayout layout_;
  int32_t n_blocks_;
  size_t k_bytes_ = 0, layer_bytes_ = 0, bytes_ = 0;
  uint8_t* arena_ = nullptr;
};

}  // namespace lumen
