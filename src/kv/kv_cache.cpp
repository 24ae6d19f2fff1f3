#include "kv/kv_cache.h"

#include <cstring>

#include "core/error.h"

namespace lumen {

KvCache::KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t kv_dim_k, int64_t kv_dim_v, GgmlType dtype)
    : n_layer_(n_layer), n_seq_(n_seq), n_ctx_(n_ctx), kv_dim_k_(kv_dim_k), kv_dim_v_(kv_dim_v), dtype_(dtype) {
  if (dtype != GgmlType::F32 && dtype != GgmlType::F16) fail("KV cache type {} is not supported (F32 or F16)", type_name(dtype));
  if (n_seq < 1 || n_ctx < 1) fail("KV cache needs at least one sequence and one position");
  row_k_ = row_size(dtype, kv_dim_k);
  row_v_ = row_size(dtype, kv_dim_v);
  const size_t rows = static_cast<size_t>(n_layer * n_seq * n_ctx);
  k_.assign(rows * row_k_, 0);
  v_.assign(rows * row_v_, 0);
  lengths_.assign(n_seq, 0);
}

void KvCache::truncate(int64_t seq, int64_t pos) {
  LUMEN_ASSERT(seq >= 0 && seq < n_seq_);
  if (pos < lengths_[seq]) lengths_[seq] = pos < 0 ? 0 : pos;
}

void KvCache::clear() {
  for (auto& l : lengths_) l = 0;
}

void KvCache::store(int64_t layer, int64_t seq, int64_t pos, const float* k, const float* v) {
  const size_t off = offset(layer, seq, pos);
  if (dtype_ == GgmlType::F32) {
    std::memcpy(k_.data() + off * row_k_, k, row_k_);
    std::memcpy(v_.data() + off * row_v_, v, row_v_);
  } else {
    auto* kd = reinterpret_cast<uint16_t*>(k_.data() + off * row_k_);
    auto* vd = reinterpret_cast<uint16_t*>(v_.data() + off * row_v_);
    for (int64_t i = 0; i < kv_dim_k_; i++) kd[i] = fp32_to_fp16(k[i]);
    for (int64_t i = 0; i < kv_dim_v_; i++) vd[i] = fp32_to_fp16(v[i]);
  }
}

}  // namespace lumen
