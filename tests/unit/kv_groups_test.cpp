// KV cache groups (kv/kv_groups.h): how layers of global and windowed attention are cut into
// groups of one block size, and the block bound a sequence reaches.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kv/kv_groups.h"

namespace lumen {
namespace {

TEST(KvGroups, NoWindowsIsOneGroupOfEveryLayer) {
  const KvGroups g = KvGroups::from_windows(22, {});
  ASSERT_EQ(g.n_groups(), 1);
  EXPECT_EQ(g.layers_per_group, 22);
  EXPECT_EQ(g.groups[0].window, 0);
  for (int il = 0; il < 22; il++) {
    EXPECT_EQ(g.layer_group[il], 0);
    EXPECT_EQ(g.layer_slot[il], il);
  }
}

TEST(KvGroups, EveryLayerWindowedIsOneWindowedGroup) {
  const std::vector<int32_t> w(4, 256);
  const KvGroups g = KvGroups::from_windows(4, w);
  ASSERT_EQ(g.n_groups(), 1);
  EXPECT_EQ(g.groups[0].window, 256);
  EXPECT_EQ(g.layers_per_group, 4);
}

TEST(KvGroups, AlternatingLayersMakeEqualGroups) {
  const std::vector<int32_t> w = {128, 0, 128, 0, 128, 0};  // Gemma 2's pattern
  const KvGroups g = KvGroups::from_windows(6, w);
  ASSERT_EQ(g.n_groups(), 2);
  EXPECT_EQ(g.layers_per_group, 3);
  EXPECT_EQ(g.groups[0].window, 0);  // global first
  EXPECT_EQ(g.groups[0].layers, (std::vector<int32_t>{1, 3, 5}));
  EXPECT_EQ(g.groups[1].window, 128);
  EXPECT_EQ(g.groups[1].layers, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(g.layer_group[4], 1);
  EXPECT_EQ(g.layer_slot[4], 2);
}

TEST(KvGroups, FiveToOneCutsTheWindowedLayersIntoGroupsOfTheGlobalCount) {
  // Gemma 3's pattern over 26 layers: every sixth layer global (5, 11, 17, 23).
  std::vector<int32_t> w(26, 512);
  for (int il = 5; il < 26; il += 6) w[il] = 0;
  const KvGroups g = KvGroups::from_windows(26, w);
  EXPECT_EQ(g.layers_per_group, 4);
  ASSERT_EQ(g.n_groups(), 1 + 6);  // 22 windowed layers in groups of 4: the last holds 2
  EXPECT_EQ(g.groups[0].layers, (std::vector<int32_t>{5, 11, 17, 23}));
  EXPECT_EQ(g.groups[6].layers, (std::vector<int32_t>{24, 25}));
  std::vector<int> seen(26, 0);
  for (const KvGroup& grp : g.groups) {
    EXPECT_LE(static_cast<int32_t>(grp.layers.size()), g.layers_per_group);
    for (int32_t il : grp.layers) seen[il]++;
  }
  for (int il = 0; il < 26; il++) EXPECT_EQ(seen[il], 1) << "layer " << il;
}

TEST(KvGroups, BadInputIsAnError) {
  EXPECT_THROW(KvGroups::from_windows(0, {}), Error);
  const std::vector<int32_t> short_list = {0, 0};
  EXPECT_THROW(KvGroups::from_windows(3, short_list), Error);
  const std::vector<int32_t> negative = {0, -4};
  EXPECT_THROW(KvGroups::from_windows(2, negative), Error);
}

TEST(KvGroups, MaxBlocksHeld) {
  const std::vector<int32_t> global = {0}, windowed = {256}, both = {0, 256};
  EXPECT_EQ(max_blocks_held(global, 16, 4096, 1), 256);
  EXPECT_EQ(max_blocks_held(windowed, 16, 4096, 1), 17);  // 256 positions span at most 17 blocks
  EXPECT_EQ(max_blocks_held(windowed, 16, 100, 1), 7);    // never more than the sequence's blocks
  EXPECT_EQ(max_blocks_held(windowed, 16, 4096, 64), 21);  // a step of 64 beside the window
  EXPECT_EQ(max_blocks_held(both, 16, 4096, 1), 256 + 17);
  EXPECT_EQ(window_begin(300, 256), 45);
  EXPECT_EQ(window_begin(255, 256), 0);
  EXPECT_EQ(window_begin(300, 0), 0);
}

}  // namespace
}  // namespace lumen
