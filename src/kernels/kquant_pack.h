// Load-time repacking of K-quant weights (Q2_K..Q6_K) for the AVX2 and AVX-512 matmul kernels,
// and the activation block layout those kernels read. Baseline code (runs once per tensor).
//
// Rows are interleaved in groups of R (16 for AVX-512, 8 for AVX2) so that one vector load holds
// the same 4 consecutive elements of R rows: a VNNI dot product against 4 activation bytes
// broadcast to every lane then yields R row partial sums at once, and a register tile of R rows
// by several tokens reuses every loaded weight vector for each token.
//
// Packed matrix: ceil(n_out / R) groups, each a 64-byte aligned run of group_bytes(); inside a
// group, first the "main" part (quant bits) of every 256-element block, then the "meta" part
// (scales, d) of every block, so both are contiguous streams. Rows past n_out are zero.
// The byte layout of one block of a group ([..] are array dimensions, r the row in the group,
// i 0..3 the byte within a 4-byte lane) is:
//   Q4_K main [c 4][k 8][r][i] = qs[32c + 4k + i]   (low nibble: sub-block 2c, high: 2c+1)
//        meta scales bytes j = 4b + 2q + jj as [b 3][q 2][r][jj 2] (12R), d[r], dmin[r] (fp16)
//   Q5_K main as Q4_K, then [k 8][r][i] = qh[4k + i]; meta as Q4_K
//   Q6_K main [h 2][k 8][j 3][r][i] = byte j of the values of elements 128h + 32rr + 4k + i,
//        rr = 0..3, packed 4 in 3 bytes (see fill() in kquant_pack.cpp)
//        meta int8 scales [g 16][r], d[r]
//   Q3_K main [h 2][k 8][r][i] = qs[32h + 4k + i], then [k 8][r][i] = hmask[4k + i]
//        meta int8 scales [g 16][r] (unpacked, offset removed), d[r]
//   Q2_K main [h 2][k 8][r][i] = qs[32h + 4k + i]; meta raw scale bytes [g 16][r], d[r], dmin[r]
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace lumen {

struct WeightMatrix;
struct PackedWeights;

namespace kquant {

inline constexpr int kBlock = 256;

// One converted activation block: the Q8_K quantization of 256 floats (bit-identical to
// from_float_q8_k) plus sums the kernels fold the weights' offsets and minimums with.
inline constexpr size_t kActQs = 0;         // int8 q[256]
inline constexpr size_t kActBsums16 = 256;  // int16 sum of q over each group of 16
inline constexpr size_t kActBsums32 = 288;  // int16 sum of q over each group of 32
inline constexpr size_t kActD = 304;        // float d
inline constexpr size_t kActCorr = 320;     // 64 bytes of offset corrections, see ActCorr
inline constexpr size_t kActBlockBytes = 320;
inline constexpr size_t kActBlockBytesCorr = 384;

// The offset correction of formats with q = v - offset (Q6_K: 32, Q3_K: 4), corr_mul = -offset:
//   Int32:   int32 corr_mul * bsums16[g] per group g (VNNI kernels start each group's int32
//            accumulator there);
//   Pairs16: per group g two int16, corr_mul * sum over k of (q[16g+4k] + q[16g+4k+1]) and of
//            (q[16g+4k+2] + q[16g+4k+3]), the lane layout of vpmaddubsw's pair sums, so AVX2
//            kernels can start their int16 accumulators there (the corrected sums fit int16).
enum class ActCorr { None, Int32, Pairs16 };

inline constexpr size_t act_block_bytes(ActCorr c) {
  return c == ActCorr::None ? kActBlockBytes : kActBlockBytesCorr;
}

// Bytes of one block of one row group, split in its main and meta parts.
struct PackLayout {
  GgmlType type;
  int rows;           // R
  size_t main_bytes;  // per block
  size_t meta_bytes;  // per block
};
PackLayout pack_layout(GgmlType type, int rows);

// Bytes of one row group of n_in / 256 blocks (rounded up to 64).
size_t group_bytes(const PackLayout& l, int64_t n_blocks);

// Repacks w (one of Q2_K..Q6_K) into groups of `rows` rows as described above.
void pack_kquant(const WeightMatrix& w, PackedWeights& out, int rows);

// The pack hooks the kernels register (R = 16 and R = 8).
void pack_kquant_r16(const WeightMatrix& w, PackedWeights& out);
void pack_kquant_r8(const WeightMatrix& w, PackedWeights& out);

// Converted activation row bytes for n_in elements (n_in a multiple of 256).
size_t act_row_bytes_plain(int64_t n_in);
size_t act_row_bytes_corr(int64_t n_in);

// Scalar conversion of one activation row into the layout above, from from_float_q8_k: what
// the vectorized conversions are tested against.
void convert_act_scalar(const float* x, uint8_t* dst, int64_t n_in, ActCorr corr, int corr_mul);

}  // namespace kquant
}  // namespace lumen
