// The web page's files (webui/assets/), embedded in the binary at build time
// by embed_assets.cmake: the page works offline and needs no install step.
//
// Thread contract: immutable; any thread.
#ifndef TORCHXD_WEBUI_ASSETS_H_
#define TORCHXD_WEBUI_ASSETS_H_

#include <string_view>
#include <vector>

namespace torchxd::webui {

struct Asset {
  std::string_view name;          // "app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view etag;          // quoted, from the file's SHA-256
  std::string_view body;
};

const std::vector<Asset>& Assets();

}  // namespace torchxd::webui

#endif  // TORCHXD_WEBUI_ASSETS_H_
