#include "kernels/quant_pack.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/quant/block_formats.h"
#include "core/quant/quant_ref.h"
#include "kernels/matmul.h"

namespace lumen {

using namespace quant;

int64_t q32_quant_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return 512;
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::IQ4_NL: return 256;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: return 320;
    default: fail("q32 packing: unsupported weight type {}", type_name(t));
  }
}

int64_t q32_scale_bytes(GgmlType t) {
  return (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) ? 64 : 32;
}

int64_t q32_pair_bytes(GgmlType t) { return 2 * (q32_quant_bytes(t) + q32_scale_bytes(t)); }

size_t q32_group_bytes(GgmlType t, int64_t n_in) {
  const int64_t n_pairs = (n_in / kQ32Block + 1) / 2;
  return static_cast<size_t>(n_pairs * q32_pair_bytes(t));
}

bool q32_packable(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL;
}

size_t q32_act_row_bytes(int64_t n_in) { return static_cast<size_t>(n_in / kQ32Block) * sizeof(Q32ActBlock); }

namespace {

// The parts of one block of one row, whatever its type.
struct BlockView {
  uint16_t d = 0;
  uint16_t m = 0;
  const uint8_t* qs = nullptr;  // 16 nibble bytes, or 32 int8 for Q8_0
  uint32_t qh = 0;              // Q5 high bits
};

BlockView view_block(GgmlType t, const uint8_t* row, int64_t b) {
  BlockView v;
  auto qh32 = [](const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  };
  switch (t) {
    case GgmlType::Q8_0: {
      const auto* x = reinterpret_cast<const BlockQ8_0*>(row) + b;
      v.d = x->d;
      v.qs = reinterpret_cast<const uint8_t*>(x->qs);
      break;
    }
    case GgmlType::Q4_0: {
      const auto* x = reinterpret_cast<const BlockQ4_0*>(row) + b;
      v.d = x->d;
      v.qs = x->qs;
      break;
    }
    case GgmlType::IQ4_NL: {
      const auto* x = reinterpret_cast<const BlockIQ4_NL*>(row) + b;
      v.d = x->d;
      v.qs = x->qs;
      break;
    }
    case GgmlType::Q4_1: {
      const auto* x = reinterpret_cast<const BlockQ4_1*>(row) + b;
      v.d = x->d;
      v.m = x->m;
      v.qs = x->qs;
      break;
    }
    case GgmlType::Q5_0: {
      const auto* x = reinterpret_cast<const BlockQ5_0*>(row) + b;
      v.d = x->d;
      v.qs = x->qs;
      v.qh = qh32(x->qh);
      break;
    }
    case GgmlType::Q5_1: {
      const auto* x = reinterpret_cast<const BlockQ5_1*>(row) + b;
      v.d = x->d;
      v.m = x->m;
      v.qs = x->qs;
      v.qh = qh32(x->qh);
      break;
    }
    default: fail("q32 packing: unsupported weight type {}", type_name(t));
  }
  return v;
}

}  // namespace

namespace {

// One row's blocks into its slot r of every block of a group (see the layout in the header).
void pack_row(GgmlType t, const uint8_t* row, int64_t nb, int64_t r, uint8_t* gp, int64_t pair_bytes, int64_t qb,
              int64_t sb, bool q8_biased) {
  const bool has_min = sb == 64;
  const bool five = t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
  const uint32_t flip = q8_biased ? 0x80808080u : 0u;
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* pair = gp + (b / 2) * pair_bytes;
    const int64_t hb = b % 2;
    const BlockView v = view_block(t, row, b);
    std::memcpy(pair + hb * 32 + 2 * r, &v.d, 2);
    if (has_min) std::memcpy(pair + 64 + hb * 32 + 2 * r, &v.m, 2);
    uint8_t* q = pair + 2 * sb + hb * qb;
    if (t == GgmlType::Q8_0) {
      for (int c = 0; c < 8; c++) {
        uint32_t x;
        std::memcpy(&x, v.qs + 4 * c, 4);
        x ^= flip;  // q + 128 as u8 when biased
        std::memcpy(q + c * 64 + 4 * r, &x, 4);
      }
      continue;
    }
    for (int p = 0; p < 4; p++) std::memcpy(q + p * 64 + 4 * r, v.qs + 4 * p, 4);
    if (five) {
      // Bits 4p..4p+3 (low halves) and 16+4p.. (high halves) of qh go to bits 4r.. of the masks.
      for (int p = 0; p < 4; p++) {
        uint8_t* lo = q + 256 + 16 * p;
        uint8_t* hi = lo + 8;
        const uint32_t lo_bits = (v.qh >> (4 * p)) & 0xf;
        const uint32_t hi_bits = (v.qh >> (16 + 4 * p)) & 0xf;
        lo[r / 2] |= static_cast<uint8_t>(lo_bits << (4 * (r % 2)));
        hi[r / 2] |= static_cast<uint8_t>(hi_bits << (4 * (r % 2)));
      }
    }
  }
}

}  // namespace

void q32_pack(const WeightMatrix& w, PackedWeights& out, bool q8_biased) {
  const GgmlType t = w.type;
  if (!q32_packable(t)) fail("q32 packing: unsupported weight type {}", type_name(t));
  if (w.n_in % kQ32Block != 0) fail("q32 packing: row length {} is not a multiple of 32", w.n_in);
  const int64_t nb = w.n_in / kQ32Block;
  const int64_t n_groups = (w.n_out + kQ32GroupRows - 1) / kQ32GroupRows;
  const size_t group_bytes = q32_group_bytes(t, w.n_in);
  uint8_t* dst = out.allocate(group_bytes * static_cast<size_t>(n_groups));
  for (int64_t g = 0; g < n_groups; g++) {
    uint8_t* gp = dst + static_cast<size_t>(g) * group_bytes;
    const int64_t n_rows = std::min<int64_t>(kQ32GroupRows, w.n_out - g * kQ32GroupRows);
    for (int64_t r = 0; r < n_rows; r++)
      pack_row(t, w.row(g * kQ32GroupRows + r), nb, r, gp, q32_pair_bytes(t), q32_quant_bytes(t), q32_scale_bytes(t),
               q8_biased);
  }
}

void q32_convert_act_q8_0(const float* x, Q32ActBlock* dst, int64_t n_blocks, int bias) {
  BlockQ8_0 blk;
  for (int64_t b = 0; b < n_blocks; b++) {
    from_float_q8_0(x + b * kQ32Block, &blk, kQ32Block);
    std::memcpy(dst[b].qs, blk.qs, kQ32Block);
    dst[b].d = fp16_to_fp32(blk.d);
    int sum = 0;
    for (int8_t q : blk.qs) sum += q;
    dst[b].corr = -bias * sum;
  }
}

void q32_convert_act_q8_1(const float* x, Q32ActBlock* dst, int64_t n_blocks) {
  BlockQ8_1 blk;
  for (int64_t b = 0; b < n_blocks; b++) {
    from_float_q8_1(x + b * kQ32Block, &blk, kQ32Block);
    std::memcpy(dst[b].qs, blk.qs, kQ32Block);
    dst[b].d = fp16_to_fp32(blk.d);
    dst[b].s = fp16_to_fp32(blk.s);
  }
}

}  // namespace lumen
