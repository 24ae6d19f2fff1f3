// The web page `lumen serve` shows at / (webui/): its built files, embedded in the binary by
// CMake (cmake/embed_web_assets.cmake) so the page works with no files beside the binary and no
// internet. A build configured with -DLUMEN_WEBUI=OFF has none.
#pragma once

#include <span>
#include <string_view>

namespace lumen::server {

struct WebAsset {
  std::string_view path;          // the URL path: "/" for index.html, "/assets/NAME" for the rest
  std::string_view content_type;
  std::string_view etag;          // quoted, from the file's SHA-256
  std::string_view body;
};

std::span<const WebAsset> web_assets();  // empty: built without the page
const WebAsset* find_web_asset(std::string_view path);

}  // namespace lumen::server
