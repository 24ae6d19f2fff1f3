#include "kernels/matmul.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"

namespace lumen {

size_t matmul_scratch_size(GgmlType weight_type, int64_t n_in, int64_t n_tokens) {
  const GgmlType act = type_traits(weight_type).vec_dot_type;
  return row_size(act, n_in) * static_cast<size_t>(n_tokens) + 64;
}

void matmul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, uint8_t* scratch, ThreadPool& pool) {
  const TypeTraits& wt = type_traits(w.type);
  LUMEN_ASSERT(wt.vec_dot != nullptr);
  const TypeTraits& at = type_traits(wt.vec_dot_type);
  const size_t act_row = row_size(at.type, w.n_in);
  const uint8_t* act = scratch;
  if (at.type == GgmlType::F32) {
    if (ldx == w.n_in) {
      act = reinterpret_cast<const uint8_t*>(x);  // already in the right format
    } else {
      for (int64_t t = 0; t < n_tokens; t++)
        std::copy(x + t * ldx, x + t * ldx + w.n_in, reinterpret_cast<float*>(scratch + t * act_row));
    }
  } else {
    LUMEN_ASSERT(at.from_float != nullptr);
    pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; t++) at.from_float(x + t * ldx, scratch + t * act_row, w.n_in);
    });
  }
  // Split output rows across threads; each chunk runs every token over its rows so a weight
  // row is reused from cache for all tokens of the batch.
  const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(64, w.n_out / (pool.n_threads() * 8)));
  pool.parallel_for(w.n_out, grain, [&](int64_t b, int64_t e, int) {
    for (int64_t o = b; o < e; o++) {
      const uint8_t* wr = w.row(o);
      for (int64_t t = 0; t < n_tokens; t++) y[t * ldy + o] = wt.vec_dot(w.n_in, wr, act + t * act_row);
    }
  });
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* dst) {
  const TypeTraits& wt = type_traits(w.type);
  LUMEN_ASSERT(wt.to_float != nullptr);
  wt.to_float(w.row(r), dst, w.n_in);
}

}  // namespace lumen
