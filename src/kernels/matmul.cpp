#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"

namespace lumen {

void PackedWeights::Free::operator()(uint8_t* p) const {
  if (mapped > 0) unmap_huge(p, mapped);
  else std::free(p);
}

uint8_t* PackedWeights::allocate(size_t n_bytes) {
  if (n_bytes >= (size_t{2} << 20)) {  // whole huge pages (core/huge_pages.h); anonymous pages are zero
    auto* p = static_cast<uint8_t*>(map_huge(n_bytes, /*reserve=*/true));
    if (!p) fail("out of memory repacking {} bytes of weights", n_bytes);
    owned = std::unique_ptr<uint8_t, Free>(p, Free{n_bytes});
    data = p;
    bytes = n_bytes;
    return p;
  }
  const size_t rounded = (n_bytes + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (!p) fail("out of memory repacking {} bytes of weights", n_bytes);
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  owned = std::unique_ptr<uint8_t, Free>(p, Free{0});
  data = p;
  bytes = n_bytes;
  return p;
}

void prepare_weights(WeightMatrix& w, Isa isa) {
  const MatmulKernel* k = find_matmul_kernel(w.type, isa);
  if (!k) fail("no matmul kernel for weight type {}", type_name(w.type));
  prepare_weights(w, *k);
}

void prepare_weights(WeightMatrix& w, const MatmulKernel& kernel) {
  LUMEN_ASSERT(kernel.weight_type == w.type);
  auto packed = std::make_shared<PackedWeights>();
  kernel.pack(w, *packed);
  w.kernel = &kernel;
  w.packed = std::move(packed);
}

size_t matmul_scratch_size(const WeightMatrix& w, int64_t n_tokens) {
  const MatmulKernel* k = w.kernel ? w.kernel : find_matmul_kernel(w.type, active_isa());
  LUMEN_ASSERT(k != nullptr);
  return (k->act_row_bytes(w.n_in) + 63) / 64 * 64 * static_cast<size_t>(n_tokens) + 64;
}

namespace {

size_t act_stride(const MatmulKernel& k, int64_t n_in) { return (k.act_row_bytes(n_in) + 63) / 64 * 64; }

uint8_t* align64(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

}  // namespace

size_t matmul_multi_scratch_size(const WeightMatrix* const* ws, int n, int64_t n_tokens) {
  size_t total = 64;
  for (int i = 0; i < n; i++) total += matmul_scratch_size(*ws[i], n_tokens);
  return total;
}

void matmul_multi(const MatmulOutput* outs, int n_outs, const float* x, int64_t ldx, int64_t n_tokens,
                  uint8_t* scratch, ThreadPool& pool) {
  LUMEN_ASSERT(n_outs >= 1 && n_outs <= kMaxMatmulOutputs);
  struct Part {
    const WeightMatrix* w;
    const MatmulKernel* k;
    const uint8_t* act;  // converted input rows in this kernel's format
    size_t stride;
    int64_t align, n_groups, grain, first_chunk;
  };
  Part parts[kMaxMatmulOutputs];
  // Convert the input once per distinct activation format (matrices of one type share it).
  uint8_t* free_act = align64(scratch);
  struct Conversion {
    void (*convert)(const float*, uint8_t*, int64_t);
    uint8_t* act;
    size_t stride;
  };
  Conversion conv[kMaxMatmulOutputs];
  int n_conv = 0;
  int64_t rows = 0;
  for (int i = 0; i < n_outs; i++) {
    const WeightMatrix& w = *outs[i].w;
    LUMEN_ASSERT(w.kernel != nullptr && w.n_in == outs[0].w->n_in);
    const MatmulKernel& k = *w.kernel;
    Part& p = parts[i];
    p.w = &w;
    p.k = &k;
    p.stride = act_stride(k, w.n_in);
    int c = 0;
    while (c < n_conv && !(conv[c].convert == k.convert_act && conv[c].stride == p.stride)) c++;
    if (c == n_conv) {
      conv[n_conv++] = {k.convert_act, free_act, p.stride};
      free_act = align64(free_act + p.stride * static_cast<size_t>(n_tokens));
    }
    p.act = conv[c].act;
    p.align = std::max<int64_t>(1, k.row_align);
    p.n_groups = (w.n_out + p.align - 1) / p.align;
    rows += w.n_out;
  }
  const int64_t n_conv_rows = n_conv * n_tokens;
  pool.parallel_for(n_conv_rows, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; i++) {
      const Conversion& c = conv[i / n_tokens];
      const int64_t t = i % n_tokens;
      c.convert(x + t * ldx, c.act + t * c.stride, outs[0].w->n_in);
    }
  });
  // Chunks of row groups claimed by threads; each chunk runs every token over its rows, so a
  // weight row is reused from cache for the whole batch. Few tokens (decode): about 4 chunks
  // per thread, in proportion to each matrix's rows: each claim is a contended atomic (~0.1 us
  // between cores), and long chunks are long sequential streams. Many tokens: ~8 chunks per
  // thread per matrix, at most 256 rows each, to balance the compute-bound work.
  const int nt = pool.n_threads();
  int64_t n_chunks = 0;
  for (int i = 0; i < n_outs; i++) {
    Part& p = parts[i];
    if (n_tokens <= 8) {
      const int64_t chunks = std::min(p.n_groups, std::max<int64_t>(1, (4 * nt * p.w->n_out + rows - 1) / rows));
      p.grain = (p.n_groups + chunks - 1) / chunks;
    } else {
      // At least 32 rows a chunk, so the kernels' two-group tiles apply to small matrices too
      // (K and V of grouped-query attention: 256 rows).
      const int64_t min_grain = std::min(p.n_groups, std::max<int64_t>(1, 32 / p.align));
      p.grain = std::clamp<int64_t>(p.n_groups / (nt * 8), min_grain, std::max<int64_t>(min_grain, 256 / p.align));
    }
    p.first_chunk = n_chunks;
    n_chunks += (p.n_groups + p.grain - 1) / p.grain;
  }
  pool.parallel_for(n_chunks, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t c = b; c < e; c++) {
      int i = n_outs - 1;
      while (c < parts[i].first_chunk) i--;
      const Part& p = parts[i];
      const int64_t g0 = (c - p.first_chunk) * p.grain;
      const int64_t r0 = g0 * p.align;
      const int64_t r1 = std::min(p.w->n_out, (g0 + p.grain) * p.align);
      p.k->compute(*p.w, p.act, p.stride, n_tokens, outs[i].y, outs[i].ldy, r0, r1);
    }
  });
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
  const MatmulOutput out{wp, y, ldy};
  matmul_multi(&out, 1, x, ldx, n_tokens, scratch, pool);
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* dst) {
  const TypeTraits& wt = type_traits(w.type);
  LUMEN_ASSERT(wt.to_float != nullptr);
  wt.to_float(w.row(r), dst, w.n_in);
}

}  // namespace lumen
