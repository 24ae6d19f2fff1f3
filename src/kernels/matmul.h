// Matrix products of a weight matrix (any supported GGUF type, rows = output features) with a
// batch of F32 activation rows. As in ggml, activations are first converted to the weight type's
// vec_dot_type (Q8_0 for Q4_0, Q8_K for K-quants, F16 for F16 ...), then each output is one
// vec_dot of a weight row with an activation row. This file is the portable reference path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "kernels/isa.h"
#include "kernels/matmul_kernel.h"

namespace lumen {

class ThreadPool;

struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;   // ne[0]: row length (input features)
  int64_t n_out = 0;  // ne[1]: rows (output features)
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }

  // Set by prepare_weights(): the kernel that computes with this matrix and its packed copy.
  const MatmulKernel* kernel = nullptr;
  std::shared_ptr<const PackedWeights> packed;
};

// Chooses the kernel for the matrix's type on `isa` and repacks the weights for it (once, at
// load). matmul() on an unprepared matrix prepares a temporary copy for the active ISA.
void prepare_weights(WeightMatrix& w, Isa isa);
// The same with a chosen kernel (of w's type).
void prepare_weights(WeightMatrix& w, const MatmulKernel& kernel);

// Bytes of scratch matmul() needs for n_tokens activation rows of w.
size_t matmul_scratch_size(const WeightMatrix& w, int64_t n_tokens);

// One output of matmul_multi(): y[t * ldy + o] = sum_i W[o, i] * x[t * ldx + i].
struct MatmulOutput {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};

// Most matrices one matmul_multi() call takes.
inline constexpr int kMaxMatmulOutputs = 4;

// Several products of the same input rows (Q, K and V; FFN gate and up) as one job on the pool:
// the input is converted once per activation format, and all matrices' row groups are shared
// out together, so decode pays one hand-off instead of one per matrix. All w have the same
// n_in and are prepared. scratch: matmul_multi_scratch_size() bytes.
void matmul_multi(const MatmulOutput* outs, int n_outs, const float* x, int64_t ldx, int64_t n_tokens,
                  uint8_t* scratch, ThreadPool& pool);
size_t matmul_multi_scratch_size(const WeightMatrix* const* ws, int n, int64_t n_tokens);

// One product of matmul_grouped(): y[t * ldy + o] = sum_i W[o, i] * x[t * ldx + i], t < n_tokens.
struct MatmulProblem {
  const WeightMatrix* w = nullptr;
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t n_tokens = 0;  // >= 1
  float* y = nullptr;
  int64_t ldy = 0;
};

// Most products one matmul_grouped() call takes.
inline constexpr int kMaxMatmulProblems = 16;
static_assert(kMaxMatmulOutputs <= kMaxMatmulProblems);

// Products of different matrices with different inputs as one job on the pool: the experts of a
// mixture, each over the tokens routed to it. An input shared by several products (the same x,
// ldx and n_tokens) is converted once per activation format, as in matmul_multi(), which is
// this with one input. The w are prepared. scratch: matmul_grouped_scratch_size() bytes.
void matmul_grouped(const MatmulProblem* ps, int n, uint8_t* scratch, ThreadPool& pool);
size_t matmul_grouped_scratch_size(const MatmulProblem* ps, int n);

// y[t * ldy + o] = sum_i W[o, i] * x[t * ldx + i] for t < n_tokens, o < n_out.
void matmul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y,
            int64_t ldy, uint8_t* scratch, ThreadPool& pool);

// One row of W as floats (embedding lookup): dst has w.n_in elements.
void dequantize_row(const WeightMatrix& w, int64_t r, float* dst);

}  // namespace lumen
