#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"

namespace lumen {

namespace {

// A mapping of huge pages that small packed buffers are carved from, front to back (never
// reused, so every carved buffer is zero); unmapped when its last buffer goes. The slab being
// carved is held weakly, so an unloaded model's last slab is not kept for the next one.
struct Slab {
  uint8_t* base = nullptr;
  size_t size = 0, used = 0;
  Slab(uint8_t* b, size_t n) : base(b), size(n) {}
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;
  ~Slab() { unmap_huge(base, size); }
};
constexpr size_t kSlabBytes = size_t{32} << 20;
std::mutex slab_mutex;
std::weak_ptr<Slab> slab_current;  // the slab being carved (guarded by slab_mutex)

}  // namespace

uint8_t* PackedWeights::allocate(size_t n_bytes) {
  uint8_t* p = nullptr;
  const size_t rounded = n_bytes == 0 ? 64 : (n_bytes + 63) / 64 * 64;
#if !defined(__SANITIZE_ADDRESS__)
  if (n_bytes < (size_t{2} << 20)) {
    std::lock_guard lock(slab_mutex);
    std::shared_ptr<Slab> slab = slab_current.lock();
    if (!slab || slab->used + rounded > slab->size) {
      auto* base = static_cast<uint8_t*>(map_huge(kSlabBytes, /*reserve=*/true));
      if (!base) fail("out of memory repacking {} bytes of weights", n_bytes);
      slab = std::make_shared<Slab>(base, kSlabBytes);
      slab_current = slab;
    }
    p = slab->base + slab->used;
    slab->used += rounded;
    owner = std::shared_ptr<const void>(slab, p);  // shares the slab's ownership
  }
#endif
  if (!p && n_bytes >= (size_t{2} << 20)) {  // whole huge pages (core/huge_pages.h); anonymous pages are zero
    p = static_cast<uint8_t*>(map_huge(n_bytes, /*reserve=*/true));
    if (!p) fail("out of memory repacking {} bytes of weights", n_bytes);
    owner = std::shared_ptr<const void>(p, [n_bytes](const void* q) { unmap_huge(const_cast<void*>(q), n_bytes); });
  } else if (!p) {
    p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
    if (!p) fail("out of memory repacking {} bytes of weights", n_bytes);
    std::memset(p, 0, rounded);
    owner = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  }
  data = p;
  bytes = n_bytes;
  return p;
}

void prepare_weights(WeightMatrix& w, Isa isa) {
  const MatmulKernel* k = find_matmul_kernel_for(w, isa);
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

namespace {

// w's kernel, or the active ISA's for an unprepared matrix.
const MatmulKernel& kernel_of(const WeightMatrix& w) {
  const MatmulKernel* k = w.kernel ? w.kernel : find_matmul_kernel_for(w, active_isa());
  LUMEN_ASSERT(k != nullptr);
  return *k;
}

}  // namespace

size_t matmul_scratch_size(const WeightMatrix& w, int64_t n_tokens) {
  return (kernel_of(w).act_row_bytes(w.n_in) + 63) / 64 * 64 * static_cast<size_t>(n_tokens) + 64;
}

namespace {

size_t act_stride(const MatmulKernel& k, int64_t n_in) { return (k.act_row_bytes(n_in) + 63) / 64 * 64; }

uint8_t* align64(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// One distinct input in one activation format: converted once, read by every product that has it.
struct Conversion {
  void (*convert)(const float*, uint8_t*, int64_t) = nullptr;
  const float* x = nullptr;
  int64_t ldx = 0, n_tokens = 0, n_in = 0;
  size_t stride = 0;
  uint8_t* act = nullptr;
  int64_t first_row = 0;  // of this conversion in the call's flat list of rows to convert
};

// The index of p's input in k's format among conv[0, n_conv), appended (its act and first_row
// left for the caller) when it is not there yet.
int conversion_of(Conversion* conv, int& n_conv, const MatmulProblem& p, const MatmulKernel& k, size_t stride) {
  for (int c = 0; c < n_conv; c++)
    if (conv[c].convert == k.convert_act && conv[c].stride == stride && conv[c].x == p.x && conv[c].ldx == p.ldx &&
        conv[c].n_tokens == p.n_tokens && conv[c].n_in == p.w->n_in)
      return c;
  conv[n_conv] = {k.convert_act, p.x, p.ldx, p.n_tokens, p.w->n_in, stride, nullptr, 0};
  return n_conv++;
}

}  // namespace

size_t matmul_grouped_scratch_size(const MatmulProblem* ps, int n) {
  LUMEN_ASSERT(n >= 1 && n <= kMaxMatmulProblems);
  Conversion conv[kMaxMatmulProblems];
  int n_conv = 0;
  size_t total = 64;
  for (int i = 0; i < n; i++) {
    const MatmulKernel& k = kernel_of(*ps[i].w);
    const size_t stride = act_stride(k, ps[i].w->n_in);
    const int before = n_conv;
    if (conversion_of(conv, n_conv, ps[i], k, stride) == before)
      total += stride * static_cast<size_t>(ps[i].n_tokens) + 64;
  }
  return total;
}

size_t matmul_multi_scratch_size(const WeightMatrix* const* ws, int n, int64_t n_tokens) {
  size_t total = 64;
  for (int i = 0; i < n; i++) total += matmul_scratch_size(*ws[i], n_tokens);
  return total;
}

namespace {

// One product of a matmul_grouped() call as the threads share it out: its row groups (of the
// kernel's row_align rows) in units of `grain` groups, numbered from first_chunk in the call.
struct Part {
  const MatmulKernel* k;
  const uint8_t* act;  // converted input rows in this kernel's format
  size_t stride;
  int64_t align, n_groups, grain, first_chunk;
};

// Units [u0, u1) of product i (all of them in it): one compute() call over their rows.
void run_units(const MatmulProblem* ps, const Part* parts, int i, int64_t u0, int64_t u1) {
  const Part& p = parts[i];
  const MatmulProblem& pr = ps[i];
  const int64_t r0 = (u0 - p.first_chunk) * p.grain * p.align;
  const int64_t r1 = std::min(pr.w->n_out, (u1 - p.first_chunk) * p.grain * p.align);
  p.k->compute(*pr.w, p.act, p.stride, pr.n_tokens, pr.y, pr.ldy, r0, r1);
}

// A few tokens (decode) read every weight byte once, so the job is a DRAM stream, and what
// costs is each restart of a stream (the prefetchers ramp up again) and the tail where one
// thread waits. Each thread therefore owns a contiguous range of the units (~16 per thread,
// shared among the products in proportion to their rows) and claims it from the front in
// halving pieces (one long stream, ending in small pieces); a thread done with its own range
// steals single units from the back of the others'. A range's front and back are one atomic
// word, so a claim is one CAS. A piece, once claimed, is its claimer's to finish: a worker the
// OS deschedules holds up the job until it runs again, as with any claimed chunk, and then
// for at most the rest of its piece (a quarter of a two-thread job at the first claim, where
// the 4 chunks per thread this replaces held an eighth; the wait for the OS to run it again
// is the larger part either way). qwen3moe-bench Q4_0 decode, 2 threads, against those chunks:
// a median paired ratio of 1.055 over ten alternations; pieces capped at the old chunks' size
// gave 1.008, so what counts is the length of each thread's stream, not only its contiguity.
constexpr int kMaxRanges = 64;
constexpr int64_t kUnitsPerThread = 16;

struct alignas(64) Range {
  std::atomic<uint64_t> front_back{0};  // front (low 32 bits) and back (high 32) unit indices
};

bool claim_front(Range& r, int64_t* u0, int64_t* u1) {
  uint64_t v = r.front_back.load(std::memory_order_relaxed);
  for (;;) {
    const auto f = static_cast<int64_t>(v & 0xffffffffu), b = static_cast<int64_t>(v >> 32);
    if (f >= b) return false;
    const int64_t take = std::max<int64_t>(1, (b - f) / 2);
    if (r.front_back.compare_exchange_weak(v, static_cast<uint64_t>(f + take) | (static_cast<uint64_t>(b) << 32),
                                           std::memory_order_relaxed)) {
      *u0 = f;
      *u1 = f + take;
      return true;
    }
  }
}

bool claim_back(Range& r, int64_t* u) {
  uint64_t v = r.front_back.load(std::memory_order_relaxed);
  for (;;) {
    const auto f = static_cast<int64_t>(v & 0xffffffffu), b = static_cast<int64_t>(v >> 32);
    if (f >= b) return false;
    if (r.front_back.compare_exchange_weak(v, static_cast<uint64_t>(f) | (static_cast<uint64_t>(b - 1) << 32),
                                           std::memory_order_relaxed)) {
      *u = b - 1;
      return true;
    }
  }
}

void few_token_job(const MatmulProblem* ps, int n, Part* parts, ThreadPool& pool) {
  const int nt = pool.n_threads();
  int64_t rows = 0;
  for (int i = 0; i < n; i++) rows += ps[i].w->n_out;
  int64_t n_units = 0;
  for (int i = 0; i < n; i++) {
    Part& p = parts[i];
    const int64_t units = std::min(p.n_groups, std::max<int64_t>(1, (kUnitsPerThread * nt * ps[i].w->n_out + rows - 1) / rows));
    p.grain = (p.n_groups + units - 1) / units;
    p.first_chunk = n_units;
    n_units += (p.n_groups + p.grain - 1) / p.grain;
  }
  Range ranges[kMaxRanges];
  for (int t = 0; t < nt; t++)
    ranges[t].front_back.store(static_cast<uint64_t>(n_units * t / nt) | (static_cast<uint64_t>(n_units * (t + 1) / nt) << 32),
                               std::memory_order_relaxed);
  // Units [u0, u1) as one compute() call per product they span.
  const auto run = [&](int64_t u0, int64_t u1) {
    while (u0 < u1) {
      int i = n - 1;
      while (u0 < parts[i].first_chunk) i--;
      const int64_t end = i + 1 < n ? std::min(u1, parts[i + 1].first_chunk) : u1;
      run_units(ps, parts, i, u0, end);
      u0 = end;
    }
  };
  // The ranges' initial values are published by the pool's job hand-off (release/acquire).
  pool.parallel_for(nt, 1, [&](int64_t b, int64_t e, int) {
    int64_t u0 = 0, u1 = 0;
    for (int64_t t = b; t < e; t++)
      while (claim_front(ranges[t], &u0, &u1)) run(u0, u1);
    for (int k = 1; k < nt; k++) {  // the others' ranges, the next one first
      Range& victim = ranges[(b + k) % nt];
      while (claim_back(victim, &u0)) run(u0, u0 + 1);
    }
  });
}

}  // namespace

void matmul_grouped(const MatmulProblem* ps, int n, uint8_t* scratch, ThreadPool& pool) {
  LUMEN_ASSERT(n >= 1 && n <= kMaxMatmulProblems);
  Part parts[kMaxMatmulProblems];
  Conversion conv[kMaxMatmulProblems];
  int n_conv = 0;
  int64_t n_conv_rows = 0;
  bool few_tokens = true;  // every product a decode-sized one
  uint8_t* free_act = align64(scratch);
  for (int i = 0; i < n; i++) {
    const MatmulProblem& pr = ps[i];
    LUMEN_ASSERT(pr.w->kernel != nullptr && pr.n_tokens >= 1);
    const MatmulKernel& k = *pr.w->kernel;
    Part& p = parts[i];
    p.k = &k;
    p.stride = act_stride(k, pr.w->n_in);
    const int before = n_conv;
    const int c = conversion_of(conv, n_conv, pr, k, p.stride);
    if (c == before) {
      conv[c].act = free_act;
      conv[c].first_row = n_conv_rows;
      free_act = align64(free_act + p.stride * static_cast<size_t>(pr.n_tokens));
      n_conv_rows += pr.n_tokens;
    }
    p.act = conv[c].act;
    p.align = std::max<int64_t>(1, k.row_align);
    p.n_groups = (pr.w->n_out + p.align - 1) / p.align;
    few_tokens &= pr.n_tokens <= 8;
  }
  // A few rows (decode) are converted on the calling thread: a hand-off costs more than
  // converting a few thousand values.
  int64_t max_n_in = 1;
  for (int c = 0; c < n_conv; c++) max_n_in = std::max(max_n_in, conv[c].n_in);
  pool.parallel_for(n_conv_rows, std::max<int64_t>(1, 8192 / max_n_in), [&](int64_t b, int64_t e, int) {
    int c = 0;
    for (int64_t i = b; i < e; i++) {
      while (c + 1 < n_conv && i >= conv[c + 1].first_row) c++;
      const Conversion& cv = conv[c];
      const int64_t t = i - cv.first_row;
      cv.convert(cv.x + t * cv.ldx, cv.act + t * cv.stride, cv.n_in);
    }
  });
  const int nt = pool.n_threads();
  if (few_tokens && nt > 1 && nt <= kMaxRanges) {
    few_token_job(ps, n, parts, pool);
    return;
  }
  // Many tokens: chunks of row groups claimed by threads; each chunk runs every token of its
  // product over its rows, so a weight row is reused from cache for all those tokens. ~8 chunks
  // per thread per product, at most 256 rows each, to balance the compute-bound work.
  int64_t n_chunks = 0;
  for (int i = 0; i < n; i++) {
    Part& p = parts[i];
    // At least 32 rows a chunk, so the kernels' two-group tiles apply to small matrices too
    // (K and V of grouped-query attention: 256 rows).
    const int64_t min_grain = std::min(p.n_groups, std::max<int64_t>(1, 32 / p.align));
    p.grain = std::clamp<int64_t>(p.n_groups / (nt * 8), min_grain, std::max<int64_t>(min_grain, 256 / p.align));
    // An even number of groups: an odd chunk ends in a one-group tile at half the two-group
    // tile's rate (gemma2's 2304 rows made chunks of 9 groups: 3% of its prefill).
    if (p.grain > 1) p.grain &= ~int64_t{1};
    p.first_chunk = n_chunks;
    n_chunks += (p.n_groups + p.grain - 1) / p.grain;
  }
  pool.parallel_for(n_chunks, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t c = b; c < e; c++) {
      int i = n - 1;
      while (c < parts[i].first_chunk) i--;
      run_units(ps, parts, i, c, c + 1);
    }
  });
}

void matmul_multi(const MatmulOutput* outs, int n_outs, const float* x, int64_t ldx, int64_t n_tokens,
                  uint8_t* scratch, ThreadPool& pool) {
  LUMEN_ASSERT(n_outs >= 1 && n_outs <= kMaxMatmulOutputs);
  MatmulProblem ps[kMaxMatmulOutputs];
  for (int i = 0; i < n_outs; i++) {
    LUMEN_ASSERT(outs[i].w->n_in == outs[0].w->n_in);
    ps[i] = {outs[i].w, x, ldx, n_tokens, outs[i].y, outs[i].ldy};
  }
  matmul_grouped(ps, n_outs, scratch, pool);
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
