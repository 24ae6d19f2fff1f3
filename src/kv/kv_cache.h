// The KV cache: for every layer and sequence slot, the K and V rows (n_head_kv heads each) of
// every position computed so far, stored as F32 or F16. Contiguous per (layer, sequence) for
// now; the paged block cache replaces this class behind the same accessors (row pointers by
// layer, sequence and position), so attention code does not change.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace lumen {

class KvCache {
 public:
  // n_seq sequence slots of n_ctx positions each; dtype F32 or F16.
  KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t kv_dim_k, int64_t kv_dim_v, GgmlType dtype);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_seq() const { return n_seq_; }
  GgmlType dtype() const { return dtype_; }
  size_t bytes() const { return k_.size() + v_.size(); }

  // Number of positions of sequence `seq` that hold valid K/V (positions 0..n-1).
  int64_t seq_length(int64_t seq) const { return lengths_[seq]; }
  // Forget positions >= pos of sequence `seq` (pos 0 clears it).
  void truncate(int64_t seq, int64_t pos);
  void clear();

  // Stores K and V rows for (layer, seq, pos). Callers check pos < n_ctx beforehand.
  void store(int64_t layer, int64_t seq, int64_t pos, const float* k, const float* v);
  // Marks positions [0, end) of seq as valid once every layer has stored them.
  void set_seq_length(int64_t seq, int64_t end) { lengths_[seq] = end; }

  const uint8_t* k_row(int64_t layer, int64_t seq, int64_t pos) const {
    return k_.data() + offset(layer, seq, pos) * row_k_;
  }
  const uint8_t* v_row(int64_t layer, int64_t seq, int64_t pos) const {
    return v_.data() + offset(layer, seq, pos) * row_v_;
  }

 private:
  size_t offset(int64_t layer, int64_t seq, int64_t pos) const {
    return static_cast<size_t>((layer * n_seq_ + seq) * n_ctx_ + pos);
  }
  int64_t n_layer_, n_seq_, n_ctx_, kv_dim_k_, kv_dim_v_;
  GgmlType dtype_;
  size_t row_k_, row_v_;
  std::vector<uint8_t> k_, v_;
  std::vector<int64_t> lengths_;
};

}  // namespace lumen
