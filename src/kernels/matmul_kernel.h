// The matmul kernel table. For each (weight type, ISA) one MatmulKernel says how to repack the
// weights once at load, how to convert activation rows, and how to compute a block of outputs.
// matmul() (kernels/matmul.cpp) drives them: it converts the activations, then splits the
// output rows across the thread pool and calls compute() on each share. The reference kernels
// (kernels/ref/) use the traits table's scalar vec_dot on the original rows; per-ISA kernels
// (kernels/avx2/, kernels/avx512/) are filed in matmul_dispatch.cpp's (type, ISA) table and must agree with
// the reference within float rounding (same activation quantization, exact integer dots).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "kernels/isa.h"

namespace lumen {

struct WeightMatrix;

// Weights in the layout a kernel wants: an owned, 64-byte aligned buffer made once at load, or
// (when the kernel reads the file's layout directly) a view of the mapped rows.
struct PackedWeights {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  // Keeps the buffer alive: its own mapping or heap block, or the shared slab it was carved from.
  std::shared_ptr<const void> owner;
  // Allocates an owned, zeroed, 64-byte aligned buffer and points data at it, in huge pages:
  // decode streams every weight byte per token (one TLB entry per 2 MiB instead of per 4 KiB),
  // and loading faults in 512x fewer pages with no memset (anonymous pages are already zero).
  // Large buffers are their own 2 MiB-aligned mappings; smaller ones (a mixture's experts, a
  // small model's matrices) are carved one after another from shared 32 MiB slabs. Under
  // AddressSanitizer small buffers come from the heap instead, where overreads are caught.
  uint8_t* allocate(size_t n_bytes);
};

struct MatmulKernel {
  const char* name;        // e.g. "q8_0/avx512-vnni"
  GgmlType weight_type;
  Isa isa;
  // Rows are handed to compute() in multiples of this (interleaved row groups); the last share
  // may end at n_out exactly. 1 for kernels that take any row range.
  int64_t row_align;
  // Repack w (n_out rows of n_in) into out. May make out.data = w.data (no copy).
  void (*pack)(const WeightMatrix& w, PackedWeights& out);
  // Bytes of one converted activation row of n_in floats, and the conversion itself.
  size_t (*act_row_bytes)(int64_t n_in);
  void (*convert_act)(const float* x, uint8_t* dst, int64_t n_in);
  // y[t * ldy + r] for rows r in [r0, r1) and tokens t in [0, n_tokens); act rows are
  // act_stride bytes apart. Called concurrently on disjoint row ranges.
  void (*compute)(const WeightMatrix& w, const uint8_t* act, size_t act_stride, int64_t n_tokens,
                  float* y, int64_t ldy, int64_t r0, int64_t r1);
};

// The kernel for this weight type on this ISA: the table's kernel at the highest level <= isa,
// else the scalar reference kernel. nullptr when the type has no matmul support at all.
const MatmulKernel* find_matmul_kernel(GgmlType type, Isa isa);

// The kernel prepare_weights() gives w on `isa`: find_matmul_kernel()'s, except for an F32 matrix
// of at most 64 rows (a mixture's router), which gets that ISA's narrow F32 kernel: its
// one-vector panels are shared out among the threads where the wide kernel's single panel (64
// rows on AVX-512, half of them padding for a 32-expert router) ran on one thread. Both give a
// row the same bits.
const MatmulKernel* find_matmul_kernel_for(const WeightMatrix& w, Isa isa);

// The opt-in kernel that computes F16 weights as BF16 (vdpbf16ps), or nullptr when `isa` has no
// BF16 dot product (it is never chosen by find_matmul_kernel: it changes the results).
const MatmulKernel* find_f16_as_bf16_kernel(Isa isa);

}  // namespace lumen
