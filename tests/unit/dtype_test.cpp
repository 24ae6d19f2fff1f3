#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace lumen {

TEST(Dtype, Fp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; h++) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << h;
  }
}

TEST(Dtype, Fp16RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 1.0f / 2048), 0x3c00);       // tie to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);       // tie to even (up)
  EXPECT_EQ(fp32_to_fp16(5.9604645e-08f), 0x0001);           // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(2.98e-08f), 0x0000);
}

TEST(Dtype, Bf16) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  for (uint32_t h = 0; h < 65536; h += 7) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_bf16(f), h);
  }
}

TEST(Dtype, TraitsTable) {
  EXPECT_EQ(type_traits(GgmlType::Q8_0).block_size, 32);
  EXPECT_EQ(type_traits(GgmlType::Q8_0).type_size, 34u);
  EXPECT_EQ(type_traits(GgmlType::Q4_K).type_size, 144u);
  EXPECT_EQ(find_type_traits(4), nullptr);  // removed Q4_2
  EXPECT_EQ(type_from_name("q6_k"), GgmlType::Q6_K);
  EXPECT_EQ(row_size(GgmlType::Q4_0, 64), 36u);
}

}  // namespace lumen
