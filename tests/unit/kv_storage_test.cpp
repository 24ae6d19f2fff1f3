// KvStorage's element types: a row written and read back (kv_row_to_float, whole or any slice)
// is the type's reference round trip (from_float then to_float), block types padding a partial
// last block with zeros; row sizes follow kv_row_bytes; other types are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/attention.h"
#include "kv/kv_storage.h"

namespace lumen {
namespace {

const GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0};

// The reference: the row zero-padded to whole blocks, quantized and dequantized whole.
std::vector<float> reference_round_trip(GgmlType t, const std::vector<float>& x) {
  const TypeTraits& tr = type_traits(t);
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t np = (n + tr.block_size - 1) / tr.block_size * tr.block_size;
  std::vector<float> padded(x);
  padded.resize(static_cast<size_t>(np), 0.0f);
  std::vector<uint8_t> q(row_size(t, np));
  tr.from_float(padded.data(), q.data(), np);
  std::vector<float> back(static_cast<size_t>(np));
  tr.to_float(q.data(), back.data(), np);
  back.resize(static_cast<size_t>(n));
  return back;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(KvStorage, RowsReadBackAsTheTypesReferenceRoundTrip) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.5f);
  for (GgmlType kt : kTypes)
    for (GgmlType vt : {GgmlType::Q8_0, GgmlType::F16, GgmlType::Q4_0})
      for (int64_t dim : {1, 8, 32, 33, 40, 96, 100})
        for (int64_t heads : {1, 3}) {
          SCOPED_TRACE(testing::Message() << type_name(kt) << "/" << type_name(vt) << " head dim " << dim << " x " << heads);
          KvLayout layout;
          layout.n_layer = 2;
          layout.n_head_kv = heads;
          layout.kv_dim_k = heads * dim;
          layout.kv_dim_v = heads * (dim + 5);
          layout.k_type = kt;
          layout.v_type = vt;
          layout.block_size = 4;
          // Each head is stored (and quantized) on its own.
          EXPECT_EQ(layout.row_bytes_k(), static_cast<size_t>(heads) * kv_row_bytes(kt, dim));
          KvStorage kv(layout, 3);
          std::vector<std::vector<float>> ks, vs;
          for (int64_t slot = 0; slot < kv.n_slots(); slot++) {
            std::vector<float> k(heads * dim), v(heads * (dim + 5));
            for (float& x : k) x = g(rng);
            for (float& x : v) x = g(rng);
            kv.write(1, slot, k.data(), v.data());
            ks.push_back(k);
            vs.push_back(v);
          }
          for (int64_t slot = 0; slot < kv.n_slots(); slot++)
            for (int64_t h = 0; h < heads; h++) {
              const std::vector<float> want_k =
                  reference_round_trip(kt, std::vector<float>(ks[slot].begin() + h * dim, ks[slot].begin() + (h + 1) * dim));
              const std::vector<float> want_v = reference_round_trip(
                  vt, std::vector<float>(vs[slot].begin() + h * (dim + 5), vs[slot].begin() + (h + 1) * (dim + 5)));
              std::vector<float> got_k(dim), got_v(dim + 5);
              kv_row_to_float(kt, kv.k_head(1, slot, h), 0, dim, got_k.data());
              kv_row_to_float(vt, kv.v_head(1, slot, h), 0, dim + 5, got_v.data());
              for (int64_t i = 0; i < dim; i++) ASSERT_TRUE(same_bits(got_k[i], want_k[i])) << "K slot " << slot << " elem " << i;
              for (int64_t i = 0; i < dim + 5; i++) ASSERT_TRUE(same_bits(got_v[i], want_v[i])) << "V slot " << slot << " elem " << i;
              // Any slice [first, first + n), starting and ending inside blocks.
              for (int64_t first = 0; first < dim; first += 3)
                for (int64_t n : {int64_t{1}, int64_t{7}, dim - first}) {
                  if (first + n > dim) continue;
                  std::vector<float> part(n);
                  kv_row_to_float(kt, kv.k_head(1, slot, h), first, n, part.data());
                  for (int64_t i = 0; i < n; i++) ASSERT_TRUE(same_bits(part[i], want_k[first + i])) << first << "+" << i;
                }
            }
        }
}

TEST(KvStorage, BlockRowsArePaddedToWholeBlocks) {
  EXPECT_EQ(kv_row_bytes(GgmlType::F32, 40), 160u);
  EXPECT_EQ(kv_row_bytes(GgmlType::F16, 40), 80u);
  EXPECT_EQ(kv_row_bytes(GgmlType::BF16, 40), 80u);
  EXPECT_EQ(kv_row_bytes(GgmlType::Q8_0, 32), 34u);
  EXPECT_EQ(kv_row_bytes(GgmlType::Q8_0, 40), 68u);
  EXPECT_EQ(kv_row_bytes(GgmlType::Q4_0, 8), 18u);
  EXPECT_EQ(kv_row_bytes(GgmlType::Q4_0, 256), 8u * 18u);
  KvLayout l;
  l.n_layer = 3;
  l.kv_dim_k = 40;
  l.kv_dim_v = 40;
  l.k_type = GgmlType::Q8_0;
  l.v_type = GgmlType::Q4_0;
  l.block_size = 16;
  EXPECT_EQ(l.block_bytes(), 3u * 16u * (68u + 36u));
}

TEST(KvStorage, RefusesOtherTypesByName) {
  KvLayout l;
  l.n_layer = 1;
  l.kv_dim_k = l.kv_dim_v = 32;
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::I8}) {
    l.k_type = GgmlType::F16;
    l.v_type = t;
    try {
      KvStorage kv(l, 1);
      ADD_FAILURE() << "accepted " << type_name(t);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string(type_name(t))), std::string::npos) << m;
      for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0"}) EXPECT_NE(m.find(name), std::string::npos) << m;
    }
  }
}

// The arena map: every (slot, head) slice has a place of its own, together exactly filling the
// arena, whatever the block size and however short the last span; a head's slices of one span
// (so of one block) are consecutive.
TEST(KvStorage, ArenaMapFillsTheArenaWithHeadMajorSpans) {
  for (int32_t bs : {1, 4, 16, 48, 1000, 1500})
    for (int64_t n_blocks : {int64_t{1}, int64_t{3}, int64_t{5000} / bs + 1})
      for (int64_t n_head : {1, 3}) {
        SCOPED_TRACE(testing::Message() << "block size " << bs << ", " << n_blocks << " blocks, " << n_head << " heads");
        const int64_t n_slots = n_blocks * bs;
        const size_t row = 8 * 1024;  // bytes of a slot's heads: spans of 256 slots, or one block
        const KvArenaMap map = KvArenaMap::of(n_slots, bs, n_head, row);
        ASSERT_EQ(map.span % bs, 0);
        ASSERT_TRUE(map.span == bs || static_cast<size_t>(map.span) * row <= kKvSpanBytes);
        ASSERT_GT(static_cast<size_t>(map.span + bs) * row, kKvSpanBytes);
        std::vector<char> seen(static_cast<size_t>(n_slots * n_head), 0);
        for (int64_t slot = 0; slot < n_slots; slot++)
          for (int64_t h = 0; h < n_head; h++) {
            const size_t at = map.offset(slot, h, 1);
            ASSERT_LT(at, seen.size());
            ASSERT_EQ(seen[at], 0) << "slot " << slot << " head " << h;
            seen[at] = 1;
            if ((slot + 1) % map.span != 0 && slot + 1 < n_slots) {
              ASSERT_EQ(map.offset(slot + 1, h, 1), at + 1);
            }
          }
        EXPECT_EQ(map.offset(n_slots - 1, n_head - 1, 40), (static_cast<size_t>(n_slots * n_head) - 1) * 40);
      }
}

// Rows written across several spans (the last one short) read back where they were written, and
// copy_rows copies a block's first rows of every head between spans and nothing else.
TEST(KvStorage, RowsAcrossSpansAndCopies) {
  KvLayout layout;
  layout.n_layer = 2;
  layout.n_head_kv = 2;
  layout.kv_dim_k = layout.kv_dim_v = 2 * 8;
  layout.k_type = GgmlType::F32;
  layout.v_type = GgmlType::F16;
  layout.block_size = 16;
  // 2 whole spans and a short one.
  const int64_t span = KvArenaMap::of(1, 16, 2, std::max(layout.row_bytes_k(), layout.row_bytes_v())).span;
  const int32_t n_blocks = static_cast<int32_t>(2 * span / 16 + 22);
  KvStorage kv(layout, n_blocks);
  // Slot s, head h, element i holds s * 100 + h * 10 + i (exact in F16 below 2048: small slots).
  auto value = [](int64_t s, int64_t h, int64_t i) { return static_cast<float>((s % 20) * 100 + h * 10 + i); };
  for (int64_t s = 0; s < kv.n_slots(); s++) {
    std::vector<float> row(16);
    for (int64_t h = 0; h < 2; h++)
      for (int64_t i = 0; i < 8; i++) row[h * 8 + i] = value(s, h, i);
    kv.write(1, s, row.data(), row.data());
  }
  auto check = [&](int64_t slot, int64_t as_slot) {
    for (int64_t h = 0; h < 2; h++) {
      std::vector<float> k(8), v(8);
      kv_row_to_float(GgmlType::F32, kv.k_head(1, slot, h), 0, 8, k.data());
      kv_row_to_float(GgmlType::F16, kv.v_head(1, slot, h), 0, 8, v.data());
      for (int64_t i = 0; i < 8; i++) {
        ASSERT_EQ(k[i], value(as_slot, h, i)) << "slot " << slot << " head " << h;
        ASSERT_EQ(v[i], value(as_slot, h, i)) << "slot " << slot << " head " << h;
      }
    }
  };
  for (int64_t s = 0; s < kv.n_slots(); s++) check(s, s);
  const BlockId src = 3, dst = n_blocks - 2;  // span 0 into the short last span
  kv.copy_rows(src, dst, 5);
  for (int64_t r = 0; r < 16; r++) check(dst * 16 + r, r < 5 ? src * 16 + r : dst * 16 + r);
  check((dst - 1) * 16 + 15, (dst - 1) * 16 + 15);
  check((dst + 1) * 16, (dst + 1) * 16);
}

}  // namespace
}  // namespace lumen
