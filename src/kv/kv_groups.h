// KV cache groups: how the layers of a model with sliding-window attention share one block
// pool, after vLLM v1's hybrid allocator. Layers with the same attention span (global, or a
// window of W positions) form a kind; each kind is cut into groups of S layers, S being the
// layer count of the smallest kind, so every group's block holds S layers' rows and all groups
// draw blocks of one size from one BlockPool. A request has one block table per group: a global
// group keeps every block, a windowed group returns blocks that have left the window to the
// pool (its table keeps kNullBlock in their place), so a windowed layer's memory stays bounded
// by its window however long the sequence grows. A model without windows has one group of all
// layers: today's layout, unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_pool.h"

namespace lumen {

// A block-table entry for a block a windowed group no longer holds (and never reads again).
constexpr BlockId kNullBlock = -1;

struct KvGroup {
  int32_t window = 0;           // 0: global attention; W > 0: the last W positions
  std::vector<int32_t> layers;  // model layers, ascending; at most layers_per_group of them
};

struct KvGroups {
  int32_t layers_per_group = 0;     // S: the layers one block holds rows for
  std::vector<KvGroup> groups;      // global groups first, then by window
  std::vector<int32_t> layer_group;  // per model layer: its group
  std::vector<int32_t> layer_slot;   // per model layer: its index within the group (0..S-1)

  int32_t n_groups() const { return static_cast<int32_t>(groups.size()); }
  std::vector<int32_t> windows() const;  // per group (KvCacheManager::Options::group_windows)
  // Per layer windows (0 = global; empty = every layer global) -> groups. Error for n_layer < 1
  // or a negative window.
  static KvGroups from_windows(int64_t n_layer, std::span<const int32_t> layer_window);
};

// The most blocks a sequence of n_tokens positions holds at once over groups with these windows
// (0 = global), computing at most max_step_tokens positions per step: a global group holds a
// block per block_size positions, a windowed one its window and the step.
int64_t max_blocks_held(std::span<const int32_t> windows, int32_t block_size, int64_t n_tokens, int64_t max_step_tokens);

// The first position a token at `pos` attends to in a group with this window.
inline int64_t window_begin(int64_t pos, int32_t window) { return window > 0 && pos + 1 > window ? pos + 1 - window : 0; }

}  // namespace lumen
