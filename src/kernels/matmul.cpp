#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace lumen {

void PackedWeights::Free::operator()(uint8_t* p) const { std::free(p); }

uint8_t* PackedWeights::allocate(size_t n_bytes) {
  const size_t rounded = (n_bytes + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (!p) fail("out of memory repacking {} bytes of weights", n_bytes);
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  owned.reset(p);
  data = p;
  bytes = n_bytes;
  return p;
}

void prepare_weights(WeightMatrix& w, Isa isa) {
  const MatmulKernel* k = find_matmul_kernel(w.type, isa);
  if (!k) fail("no matmul kernel for weight type {}", type_name(w.type));
  auto packed = std::make_shared<PackedWeights>();
  k->pack(w, *packed);
  w.kernel = k;
  w.packed = std::move(packed);
}

size_t matmul_scratch_size(const WeightMatrix& w, int64_t n_tokens) {
  const MatmulKernel* k = w.kernel ? w.kernel : find_matmul_kernel(w.type, active_isa());
  LUMEN_ASSERT(k != nullptr);
  return (k->act_row_bytes(w.n_in) + 63) / 64 * 64 * static_cast<size_t>(n_tokens) + 64;
}

void matmul(const WeightMatrix& w_in, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, uint8_t* scratch, ThreadPool& pool) {
  const WeightMatrix* wp = &w_in;
  WeightMatrix tmp;
  if (!w_in.kernel) {  // tests and tools that skip prepare_weights()
    tmp = w_in;
    prepare_weights(tmp, active_isa());
    wp = &tmp;
  }
  const WeightMatrix& w = *wp;
  const MatmulKernel& k = *w.kernel;
  // Activation rows 64-byte aligned so kernels may use aligned loads.
  uint8_t* act = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  const size_t stride = (k.act_row_bytes(w.n_in) + 63) / 64 * 64;
  pool.parallel_for(n_tokens, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; t++) k.convert_act(x + t * ldx, act + t * stride, w.n_in);
  });
  // Split output rows into chunks (multiples of the kernel's row group) claimed by threads;
  // each chunk runs every token over its rows, so a weight row is reused from cache for the
  // whole batch.
  const int64_t align = std::max<int64_t>(1, k.row_align);
  const int64_t n_groups = (w.n_out + align - 1) / align;
  const int64_t target = std::max<int64_t>(1, n_groups / (pool.n_threads() * 8));
  const int64_t grain = std::min<int64_t>(target, std::max<int64_t>(1, 256 / align));
  pool.parallel_for(n_groups, grain, [&](int64_t b, int64_t e, int) {
    const int64_t r0 = b * align;
    const int64_t r1 = std::min(w.n_out, e * align);
    k.compute(w, act, stride, n_tokens, y, ldy, r0, r1);
  });
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* dst) {
  const TypeTraits& wt = type_traits(w.type);
  LUMEN_ASSERT(wt.to_float != nullptr);
  wt.to_float(w.row(r), dst, w.n_in);
}

}  // namespace lumen
