#include "kv/kv_groups.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace lumen {

KvGroups KvGroups::from_windows(int64_t n_layer, std::span<const int32_t> layer_window) {
  if (n_layer < 1) fail("a KV cache needs at least one layer");
  if (!layer_window.empty() && static_cast<int64_t>(layer_window.size()) != n_layer)
    fail("{} layer windows for {} layers", layer_window.size(), n_layer);
  // Layers by attention span; std::map puts global (0) first, then windows ascending.
  std::map<int32_t, std::vector<int32_t>> kinds;
  for (int32_t il = 0; il < n_layer; il++) {
    const int32_t w = layer_window.empty() ? 0 : layer_window[il];
    if (w < 0) fail("layer {} has a negative attention window {}", il, w);
    kinds[w].push_back(il);
  }
  KvGroups g;
  g.layers_per_group = static_cast<int32_t>(n_layer);
  for (const auto& [w, layers] : kinds) g.layers_per_group = std::min(g.layers_per_group, static_cast<int32_t>(layers.size()));
  g.layer_group.assign(static_cast<size_t>(n_layer), 0);
  g.layer_slot.assign(static_cast<size_t>(n_layer), 0);
  for (const auto& [w, layers] : kinds) {
    for (size_t i = 0; i < layers.size(); i += static_cast<size_t>(g.layers_per_group)) {
      KvGroup group;
      group.window = w;
      const size_t end = std::min(layers.size(), i + static_cast<size_t>(g.layers_per_group));
      group.layers.assign(layers.begin() + static_cast<std::ptrdiff_t>(i), layers.begin() + static_cast<std::ptrdiff_t>(end));
      for (size_t j = 0; j < group.layers.size(); j++) {
        g.layer_group[group.layers[j]] = g.n_groups();
        g.layer_slot[group.layers[j]] = static_cast<int32_t>(j);
      }
      g.groups.push_back(std::move(group));
    }
  }
  return g;
}

std::vector<int32_t> KvGroups::windows() const {
  std::vector<int32_t> w;
  for (const KvGroup& g : groups) w.push_back(g.window);
  return w;
}

int64_t max_blocks_held(std::span<const int32_t> windows, int32_t block_size, int64_t n_tokens, int64_t max_step_tokens) {
  auto blocks_for = [block_size](int64_t n) { return (n + block_size - 1) / block_size; };
  int64_t n = 0;
  for (const int32_t w : windows) {
    const int64_t all = blocks_for(n_tokens);
    // A step computing tokens [c, c + k) holds the blocks of [c - w + 1, c + k): at most
    // blocks_for(w - 1 + k) + 1 of them (the range may start inside a block).
    n += w == 0 ? all : std::min(all, blocks_for(w - 1 + max_step_tokens) + 1);
  }
  return n;
}

}  // namespace lumen
