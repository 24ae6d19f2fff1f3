#include "server/web_assets.h"

namespace lumen::server {

const WebAsset* find_web_asset(std::string_view path) {
  for (const WebAsset& a : web_assets())
    if (a.path == path) return &a;
  return nullptr;
}

}  // namespace lumen::server
