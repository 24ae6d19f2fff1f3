// Byte layouts of the ggml block formats, as the GGUF format description gives them. Every
// struct is exactly one block as stored in a file (little-endian, no padding), so a row of
// blocks can be read in place from a memory-mapped tensor. Half-precision fields are raw
// IEEE binary16 bits (uint16_t); convert with fp16_to_fp32().
#pragma once

#include <cstdint>

namespace lumen::quant {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_K = 256;        // super-block size of the K-quants
inline constexpr int kKScaleSize = 12;   // packed 6-bit scales/mins of Q4_K, Q5_K

// x = d * (q - 8), q in 0..15. Element j of the block is the low nibble of qs[j] for j < 16
// and the high nibble of qs[j - 16] otherwise.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x = d * q + m, q in 0..15, same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x = d * (q - 16), q in 0..31: low 4 bits as in Q4_0, bit 4 of element j is bit j of qh
// (qh is a little-endian uint32 stored as bytes so the struct has no alignment padding).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x = d * q + m, q in 0..31, bits as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x = d * q, q in -127..127 (quantizers never produce -128).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q8_0 plus s = d * sum(q) (activation format of Q4_1/Q5_1; s carries the block minimum's term).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36);

// Non-linear 4-bit: x = d * kIq4nlValues[q], nibble order as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// 2-bit K-quant: 16 sub-blocks of 16; scales[j] holds the 4-bit scale (low nibble) and 4-bit
// min (high nibble) of sub-block j; x = d * scale * q - dmin * min.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 3-bit K-quant: 2 low bits in qs, the high bit in hmask (set means +0, clear means -4),
// 16 signed 6-bit scales (offset 32) packed into 12 bytes; x = d * scale * q.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 4-bit K-quant: 8 sub-blocks of 32 with 6-bit scales and mins packed into 12 bytes;
// x = d * scale * q - dmin * min.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// 5-bit K-quant: Q4_K plus one high bit per element in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 6-bit K-quant: 4 low bits in ql, 2 high bits in qh, 16 signed 8-bit scales;
// x = d * scale * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activation format of the K-quants: float scale, and the sums of each group of 16 quants
// (bsums) so that vec_dot can apply the weights' per-sub-block minimums cheaply.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// The 16 levels of IQ4_NL (and IQ4_XS), from the ggml format description.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace lumen::quant
