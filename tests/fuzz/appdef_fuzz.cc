// Fuzz target: an AppDef JSON document (a file given to `torchx run`, or
// params.app of a frame): decode, validate, encode, decode again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/app_json.h"
#include "core/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  torchxd::core::AppDefDecodeOptions options;
  options.home = "/home/u";
  auto app = torchxd::core::ParseAppDefJson(text, options);
  if (!app) return 0;
  // What was accepted round-trips exactly and stays valid.
  auto again = torchxd::core::AppDefFromJson(torchxd::core::AppDefToJson(*app));
  TORCHXD_CHECK(again.has_value());
  TORCHXD_CHECK(*again == *app);
  return 0;
}
