#include "kernels/kquant_pack.h"

#include <cstring>

#include "core/error.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"
#include "kernels/matmul.h"

namespace lumen::kquant {

using namespace quant;

namespace {

// Copies byte i of 4-byte lane (row r) from src[off + 4k + i] for k in 0..n_lanes-1 into
// dst[k][r][i] (R rows per vector).
void put_lanes(uint8_t* dst, int rows, int r, const uint8_t* src, int n_lanes) {
  for (int k = 0; k < n_lanes; k++)
    std::memcpy(dst + (static_cast<size_t>(k) * rows + r) * 4, src + 4 * k, 4);
}

void put_fp16(uint8_t* dst, int r, uint16_t v) { std::memcpy(dst + 2 * r, &v, 2); }

// Q4_K/Q5_K scale bytes j = 4b + 2q + jj go to [b][q][r][jj] so that, after the 6-bit unpack
// done on whole vectors, each half vector widened to 16-bit lanes holds the (even, odd)
// sub-block pair of every row in one 32-bit lane.
void put_k4_scales(uint8_t* meta, int rows, int r, const uint8_t s[kKScaleSize]) {
  for (int j = 0; j < kKScaleSize; j++) {
    const int b = j / 4, q = (j % 4) / 2, jj = j % 2;
    meta[static_cast<size_t>(b) * 4 * rows + static_cast<size_t>(q) * 2 * rows + 2 * r + jj] = s[j];
  }
}

void fill(const BlockQ4_K& x, int rows, int r, uint8_t* main, uint8_t* meta) {
  for (int c = 0; c < 4; c++)
    put_lanes(main + static_cast<size_t>(c) * 8 * rows * 4, rows, r, x.qs + 32 * c, 8);
  put_k4_scales(meta, rows, r, x.scales);
  put_fp16(meta + 12 * rows, r, x.d);
  put_fp16(meta + 14 * rows, r, x.dmin);
}

void fill(const BlockQ5_K& x, int rows, int r, uint8_t* main, uint8_t* meta) {
  for (int c = 0; c < 4; c++)
    put_lanes(main + static_cast<size_t>(c) * 8 * rows * 4, rows, r, x.qs + 32 * c, 8);
  put_lanes(main + static_cast<size_t>(128) * rows, rows, r, x.qh, 8);
  put_k4_scales(meta, rows, r, x.scales);
  put_fp16(meta + 12 * rows, r, x.d);
  put_fp16(meta + 14 * rows, r, x.dmin);
}

// Q6_K: the four 6-bit values v0..v3 of elements 128h + 32rr + 4k + i (rr = 0..3) go into 3
// bytes, each with a whole value in its low 6 bits and 2 bits of v2 on top:
//   b0 = v0 | (v2 & 3) << 6,  b1 = v1 | (v2 >> 2 & 3) << 6,  b2 = v3 | (v2 >> 4) << 6,
// so three values are one AND away and the fourth a few shifts (fewer operations than the
// file's ql/qh split, for the same 6 bits per weight).
void fill(const BlockQ6_K& x, int rows, int r, uint8_t* main, uint8_t* meta) {
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 8; k++)
      for (int i = 0; i < 4; i++) {
        int v[4];
        for (int rr = 0; rr < 4; rr++) {
          const int l = 4 * k + i;
          const int low = (x.ql[64 * h + 32 * (rr % 2) + l] >> (4 * (rr / 2))) & 0x0f;
          const int high = (x.qh[32 * h + l] >> (2 * rr)) & 3;
          v[rr] = low | high << 4;
        }
        const int b[3] = {v[0] | (v[2] & 3) << 6, v[1] | (v[2] >> 2 & 3) << 6, v[3] | (v[2] >> 4) << 6};
        for (int j = 0; j < 3; j++)
          main[(static_cast<size_t>((h * 8 + k) * 3 + j) * rows + r) * 4 + i] = static_cast<uint8_t>(b[j]);
      }
  for (int g = 0; g < 16; g++) meta[static_cast<size_t>(g) * rows + r] = static_cast<uint8_t>(x.scales[g]);
  put_fp16(meta + 16 * rows, r, x.d);
}

void fill(const BlockQ3_K& x, int rows, int r, uint8_t* main, uint8_t* meta) {
  for (int h = 0; h < 2; h++)
    put_lanes(main + static_cast<size_t>(h) * 8 * rows * 4, rows, r, x.qs + 32 * h, 8);
  put_lanes(main + static_cast<size_t>(64) * rows, rows, r, x.hmask, 8);
  for (int g = 0; g < 16; g++) {
    const int low = g < 8 ? (x.scales[g] & 0x0f) : (x.scales[g - 8] >> 4);
    const int high = (x.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    meta[static_cast<size_t>(g) * rows + r] =
        static_cast<uint8_t>(static_cast<int8_t>((low | (high << 4)) - 32));
  }
  put_fp16(meta + 16 * rows, r, x.d);
}

void fill(const BlockQ2_K& x, int rows, int r, uint8_t* main, uint8_t* meta) {
  for (int h = 0; h < 2; h++)
    put_lanes(main + static_cast<size_t>(h) * 8 * rows * 4, rows, r, x.qs + 32 * h, 8);
  for (int g = 0; g < 16; g++) meta[static_cast<size_t>(g) * rows + r] = x.scales[g];
  put_fp16(meta + 16 * rows, r, x.d);
  put_fp16(meta + 18 * rows, r, x.dmin);
}

template <class Block>
void pack_typed(const WeightMatrix& w, PackedWeights& out, const PackLayout& l) {
  const int64_t nb = w.n_in / kBlock;
  const int64_t n_groups = (w.n_out + l.rows - 1) / l.rows;
  const size_t gbytes = group_bytes(l, nb);
  uint8_t* dst = out.allocate(gbytes * static_cast<size_t>(n_groups));  // zeroed: padding rows
  for (int64_t g = 0; g < n_groups; g++) {
    uint8_t* group = dst + gbytes * static_cast<size_t>(g);
    for (int r = 0; r < l.rows; r++) {
      const int64_t row = g * l.rows + r;
      if (row >= w.n_out) break;
      const auto* blocks = reinterpret_cast<const Block*>(w.data + static_cast<size_t>(row) * w.row_bytes);
      for (int64_t b = 0; b < nb; b++)
        fill(blocks[b], l.rows, r, group + l.main_bytes * static_cast<size_t>(b),
             group + l.main_bytes * static_cast<size_t>(nb) + l.meta_bytes * static_cast<size_t>(b));
    }
  }
}

}  // namespace

PackLayout pack_layout(GgmlType type, int rows) {
  const size_t r = static_cast<size_t>(rows);
  switch (type) {
    case GgmlType::Q4_K:
      return {type, rows, 128 * r, 16 * r};
    case GgmlType::Q5_K:
      return {type, rows, 160 * r, 16 * r};
    case GgmlType::Q6_K:
      return {type, rows, 192 * r, 18 * r};
    case GgmlType::Q3_K:
      return {type, rows, 96 * r, 18 * r};
    case GgmlType::Q2_K:
      return {type, rows, 64 * r, 20 * r};
    default:
      fail("K-quant repack: unsupported weight type {}", type_name(type));
  }
}

size_t group_bytes(const PackLayout& l, int64_t n_blocks) {
  const size_t n = (l.main_bytes + l.meta_bytes) * static_cast<size_t>(n_blocks);
  return (n + 63) / 64 * 64;
}

void pack_kquant(const WeightMatrix& w, PackedWeights& out, int rows) {
  if (w.n_in % kBlock != 0)
    fail("K-quant repack: row length {} of a {} matrix is not a multiple of {}", w.n_in, type_name(w.type),
         kBlock);
  const PackLayout l = pack_layout(w.type, rows);
  switch (w.type) {
    case GgmlType::Q4_K:
      pack_typed<BlockQ4_K>(w, out, l);
      break;
    case GgmlType::Q5_K:
      pack_typed<BlockQ5_K>(w, out, l);
      break;
    case GgmlType::Q6_K:
      pack_typed<BlockQ6_K>(w, out, l);
      break;
    case GgmlType::Q3_K:
      pack_typed<BlockQ3_K>(w, out, l);
      break;
    case GgmlType::Q2_K:
      pack_typed<BlockQ2_K>(w, out, l);
      break;
    default:
      fail("K-quant repack: unsupported weight type {}", type_name(w.type));
  }
}

void pack_kquant_r16(const WeightMatrix& w, PackedWeights& out) { pack_kquant(w, out, 16); }
void pack_kquant_r8(const WeightMatrix& w, PackedWeights& out) { pack_kquant(w, out, 8); }

size_t act_row_bytes_plain(int64_t n_in) { return static_cast<size_t>(n_in / kBlock) * kActBlockBytes; }
size_t act_row_bytes_corr(int64_t n_in) { return static_cast<size_t>(n_in / kBlock) * kActBlockBytesCorr; }

void convert_act_scalar(const float* x, uint8_t* dst, int64_t n_in, ActCorr corr, int corr_mul) {
  const size_t bb = act_block_bytes(corr);
  BlockQ8_K q;
  for (int64_t b = 0; b < n_in / kBlock; b++, dst += bb) {
    from_float_q8_k(x + b * kBlock, &q, kBlock);
    std::memset(dst, 0, bb);
    std::memcpy(dst + kActQs, q.qs, sizeof(q.qs));
    std::memcpy(dst + kActBsums16, q.bsums, sizeof(q.bsums));
    for (int s = 0; s < 8; s++) {
      const int16_t v = static_cast<int16_t>(q.bsums[2 * s] + q.bsums[2 * s + 1]);
      std::memcpy(dst + kActBsums32 + 2 * s, &v, 2);
    }
    std::memcpy(dst + kActD, &q.d, 4);
    for (int g = 0; g < 16 && corr == ActCorr::Int32; g++) {
      const int32_t v = corr_mul * q.bsums[g];
      std::memcpy(dst + kActCorr + 4 * g, &v, 4);
    }
    for (int g = 0; g < 16 && corr == ActCorr::Pairs16; g++)
      for (int jj = 0; jj < 2; jj++) {
        int sum = 0;
        for (int k = 0; k < 4; k++) sum += q.qs[16 * g + 4 * k + 2 * jj] + q.qs[16 * g + 4 * k + 2 * jj + 1];
        const int16_t v = static_cast<int16_t>(corr_mul * sum);
        std::memcpy(dst + kActCorr + 4 * g + 2 * jj, &v, 2);
      }
  }
}

}  // namespace lumen::kquant
