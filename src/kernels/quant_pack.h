// The repacked layout the AVX2/AVX-512 kernels of the 32-element block formats (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL) read, and the activation layout their convert_act writes. Baseline
// code only: the packers here run at load time on any CPU; the per-ISA kernels include this
// header for the layout constants.
//
// Weights: rows are interleaved in groups of kQ32GroupRows (16) so that one 64-byte vector
// holds 4 consecutive quants of each of 16 rows ("chunk" layout): an int8 dot product with a
// broadcast 4-byte activation chunk (vpdpbusd, or vpmaddubsw+vpmaddwd per 8-row half) then
// yields one int32 per row, with no horizontal sums. A group is a sequence of block pairs:
//
//   pair   = [scales of block 0][scales of block 1][quants of block 0][quants of block 1]
//   scales = 16 fp16 d's (32 bytes), and for Q4_1/Q5_1 the 16 fp16 m's are after both d's:
//            [d b0][d b1][m b0][m b1]
//   quants (per type, per block, r = row in group, i = 0..3):
//     Q8_0       8 chunks c of 64 bytes: byte 4r+i of chunk c = qs[4c+i] of row r, stored
//                as q+128 (u8) when biased (AVX-512: vpdpbusd wants u8 x s8), else as is
//     Q4_0/Q4_1/IQ4_NL  4 vectors p of 64 bytes: byte 4r+i of vector p = byte qs[4p+i] of row
//                r, so its low nibble is element 4p+i and its high nibble element 16+4p+i
//     Q5_0/Q5_1  the 4 nibble vectors as Q4_0, then per p two 64-bit masks (16 bytes at
//                256+16p): bit 4r+i of the first is bit 4 of element 4p+i of row r, of the
//                second bit 4 of element 16+4p+i
//
// Every pair is a multiple of 64 bytes, so vector loads never split cache lines. An odd last
// block and the rows past n_out in the last group are zero padding (never read into results).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/matmul_kernel.h"

namespace lumen {

struct WeightMatrix;

inline constexpr int kQ32GroupRows = 16;
inline constexpr int kQ32Block = 32;

// One converted activation block: the reference Q8_0/Q8_1 quants, d = fp16-rounded scale as
// f32, and `extra`: for the Q8_0 family -bias * sum(qs) as int32 (bias = the offset the kernel
// added to its unsigned weights: 128 for Q8_0/IQ4_NL, 8 for Q4_0, 16 for Q5_0), for the Q8_1
// family s = fp16-rounded d * sum(qs) as f32.
struct Q32ActBlock {
  int8_t qs[kQ32Block];
  float d;
  union {
    int32_t corr;
    float s;
  };
};
static_assert(sizeof(Q32ActBlock) == 40);

// Bytes per block of one group: quants and scales.
int64_t q32_quant_bytes(GgmlType t);
int64_t q32_scale_bytes(GgmlType t);
// Bytes of one block pair of a group (a multiple of 64) and of a whole group of 16 rows.
int64_t q32_pair_bytes(GgmlType t);
size_t q32_group_bytes(GgmlType t, int64_t n_in);
// True for the six types packed here.
bool q32_packable(GgmlType t);

// Repacks w (one of the six types; n_in a multiple of 32) into out. q8_biased: store Q8_0
// quants as q+128 (ignored for other types).
void q32_pack(const WeightMatrix& w, PackedWeights& out, bool q8_biased);

// Activation row size (n_in / 32 blocks of Q32ActBlock).
size_t q32_act_row_bytes(int64_t n_in);

// Scalar (reference-exact) activation conversion for the Q8_0 family with the given bias, and
// for the Q8_1 family: the oracle the vectorized versions are tested against, and their tail.
void q32_convert_act_q8_0(const float* x, Q32ActBlock* dst, int64_t n_blocks, int bias);
void q32_convert_act_q8_1(const float* x, Q32ActBlock* dst, int64_t n_blocks);

}  // namespace lumen
