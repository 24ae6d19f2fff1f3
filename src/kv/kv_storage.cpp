#include "kv/kv_storage.h"


#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/huge_pages.h"
#include "kernels/ops.h"

namespace lumen {

namespace {

// Head hk's slices of positions [pos0, pos0 + n) of one sequence, walked block by block (within
// a block, a head's slices are contiguous).
void fetch_paged_rows(const void* ctx, int64_t pos0, int64_t n, int64_t hk, const uint8_t** k_rows,
                      const uint8_t** v_rows) {
  const auto& s = *static_cast<const PagedKvSource*>(ctx);
  const int64_t bs = s.block_size;
  int64_t i = 0;
  while (i < n) {
    const int64_t pos = pos0 + i;
    const int64_t bi = pos / bs, off = pos % bs;
    const int64_t run = std::min<int64_t>(bs - off, n - i);
    // Blocks a windowed group has released are never asked for (attention.h: KvRows).
    LUMEN_ASSERT(bi < s.n_blocks && s.table[bi] != kNullBlock);
    const int64_t slot = static_cast<int64_t>(s.table[bi]) * bs + off;
    const size_t at = s.map.index(slot, hk);
    const uint8_t* k = s.k + at * s.head_k;
    const uint8_t* v = s.v + at * s.head_v;
    for (int64_t j = 0; j < run; j++) {
      k_rows[i + j] = k + j * s.head_k;
      v_rows[i + j] = v + j * s.head_v;
    }
    i += run;
  }
}

void store_f16(const float* src, void* dst, int64_t n) { to_f16(src, static_cast<uint16_t*>(dst), n); }
void store_bf16(const float* src, void* dst, int64_t n) { to_bf16(src, static_cast<uint16_t*>(dst), n); }

// One row of n floats in the storage type (kv_row_bytes(type, n) bytes at dst). A block type
// whose last block is partial quantizes a zero-padded copy. F16, BF16 and Q8_0 go through the
// vector kernels (kernels/ops.h: the same bits as their scalar from_float).
void store_row(GgmlType type, const float* src, int64_t n, uint8_t* dst) {
  const TypeTraits& tr = type_traits(type);
  FromFloatFn store = type == GgmlType::F16    ? store_f16
                      : type == GgmlType::BF16 ? store_bf16
                      : type == GgmlType::Q8_0 ? to_q8_0
                                               : tr.from_float;
  if (n % tr.block_size == 0) {
    store(src, dst, n);
    return;
  }
  thread_local std::vector<float> padded;
  const int64_t np = (n + tr.block_size - 1) / tr.block_size * tr.block_size;
  padded.assign(static_cast<size_t>(np), 0.0f);
  std::copy(src, src + n, padded.begin());
  store(padded.data(), dst, np);
}

}  // namespace

KvRows PagedKvSource::rows() const { return KvRows{fetch_paged_rows, this}; }

KvStorage::KvStorage(const KvLayout& layout, int32_t n_blocks)
    : layout_(layout), groups_(layout.groups()), n_blocks_(n_blocks) {
  for (GgmlType t : {layout.k_type, layout.v_type})
    if (!kv_type_supported(t)) fail("KV cache type {} is not supported (f32, f16, bf16, q8_0 or q4_0)", type_name(t));
  if (n_blocks < 1) fail("the KV cache needs at least one block, got {}", n_blocks);
  if (layout.block_size < 1) fail("the KV block size must be at least 1, got {}", layout.block_size);
  if (layout.n_layer < 1 || layout.n_head_kv < 1 || layout.kv_dim_k < 1 || layout.kv_dim_v < 1)
    fail("KV cache layout without layers or heads");
  if (layout.kv_dim_k % layout.n_head_kv != 0 || layout.kv_dim_v % layout.n_head_kv != 0)
    fail("KV rows of {}/{} elements do not split into {} heads", layout.kv_dim_k, layout.kv_dim_v, layout.n_head_kv);
  const size_t slots = static_cast<size_t>(n_blocks) * layout.block_size;
  map_ = KvArenaMap::of(static_cast<int64_t>(slots), layout.block_size, layout.n_head_kv,
                        std::max(layout.row_bytes_k(), layout.row_bytes_v()));
  // Each layer's K and V arenas start on a 64-byte boundary.
  auto round64 = [](size_t b) { return (b + 63) / 64 * 64; };
  k_bytes_ = round64(slots * layout.row_bytes_k());
  layer_bytes_ = k_bytes_ + round64(slots * layout.row_bytes_v());
  bytes_ = layer_bytes_ * static_cast<size_t>(groups_.layers_per_group);
  // Anonymous pages are zero and committed on first write: a large pool costs only what is used
  // (in 2 MiB pages: core/huge_pages.h says why).
  void* p = map_huge(bytes_, /*reserve=*/false);
  if (!p) fail("cannot map {} bytes for the KV cache ({} blocks)", bytes_, n_blocks);
  arena_ = static_cast<uint8_t*>(p);
}

KvStorage::~KvStorage() {
  unmap_huge(arena_, bytes_);
}

void KvStorage::write(int64_t layer, int64_t slot, const float* k, const float* v) {
  LUMEN_ASSERT(layer >= 0 && layer < layout_.n_layer && slot >= 0 && slot < n_slots());
  const int64_t dk = layout_.kv_dim_k / layout_.n_head_kv, dv = layout_.kv_dim_v / layout_.n_head_kv;
  for (int64_t h = 0; h < layout_.n_head_kv; h++) write_head(layer, slot, h, k + h * dk, v + h * dv);
}

void KvStorage::write_head(int64_t layer, int64_t slot, int64_t h, const float* k, const float* v) {
  LUMEN_ASSERT(layer >= 0 && layer < layout_.n_layer && slot >= 0 && slot < n_slots() && h >= 0 &&
               h < layout_.n_head_kv);
  const int64_t dk = layout_.kv_dim_k / layout_.n_head_kv, dv = layout_.kv_dim_v / layout_.n_head_kv;
  store_row(layout_.k_type, k, dk, const_cast<uint8_t*>(k_head(layer, slot, h)));
  store_row(layout_.v_type, v, dv, const_cast<uint8_t*>(v_head(layer, slot, h)));
}

void KvStorage::prefetch_write(int64_t layer, int64_t slot, int64_t h) const {
  LUMEN_ASSERT(layer >= 0 && layer < layout_.n_layer && slot >= 0 && slot < n_slots() && h >= 0 &&
               h < layout_.n_head_kv);
  const uint8_t* k = k_head(layer, slot, h);
  const uint8_t* v = v_head(layer, slot, h);
  for (size_t off = 0; off < layout_.head_bytes_k(); off += 64) __builtin_prefetch(k + off, 1, 3);
  for (size_t off = 0; off < layout_.head_bytes_v(); off += 64) __builtin_prefetch(v + off, 1, 3);
}

void KvStorage::copy_rows(BlockId src, BlockId dst, int32_t n_rows) {
  LUMEN_ASSERT(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_ && n_rows >= 0 && n_rows <= layout_.block_size);
  const size_t bs = static_cast<size_t>(layout_.block_size);
  const size_t hk = layout_.head_bytes_k(), hv = layout_.head_bytes_v();
  // Each head's first n_rows slices (a block's slices of one head are contiguous).
  for (int64_t l = 0; l < groups_.layers_per_group; l++)
    for (int64_t h = 0; h < layout_.n_head_kv; h++) {
      std::memcpy(k_base(l) + map_.offset(dst * bs, h, hk), k_base(l) + map_.offset(src * bs, h, hk), n_rows * hk);
      std::memcpy(v_base(l) + map_.offset(dst * bs, h, hv), v_base(l) + map_.offset(src * bs, h, hv), n_rows * hv);
    }
}

PagedKvSource KvStorage::source(int64_t layer, std::span<const BlockId> table) const {
  PagedKvSource s;
  LUMEN_ASSERT(layer >= 0 && layer < layout_.n_layer);
  s.k = k_layer(layer);
  s.v = v_layer(layer);
  s.map = map_;
  s.head_k = layout_.head_bytes_k();
  s.head_v = layout_.head_bytes_v();
  s.table = table.data();
  s.n_blocks = static_cast<int64_t>(table.size());
  s.block_size = layout_.block_size;
  return s;
}

}  // namespace lumen
