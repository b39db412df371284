#include "imageproviders/image_provider.h"

#include <filesystem>

namespace torchxd::imageproviders {

namespace fs = std::filesystem;

Result<std::vector<core::RoleLocation>> FetchRoles(std::string_view scheduler,
                                                   const core::AppDef& app,
                                                   const std::string& client_cwd) {
  std::vector<core::RoleLocation> out;
  for (const auto& role : app.roles) {
    if (scheduler == "local_cwd") {
      out.push_back({client_cwd, client_cwd});
      continue;
    }
    if (scheduler != "local_dir") {
      return Fail(Error::InvalidArgument("no image provider for scheduler " + std::string(scheduler)));
    }
    fs::path dir = fs::path(role.image).is_absolute() ? fs::path(role.image)
                                                       : fs::path(client_cwd) / role.image;
    std::error_code ec;
    if (role.image.empty() || !fs::is_directory(dir, ec)) {
      return Fail(Error::InvalidArgument("Invalid image name: " + role.image +
                                         ", does not exist or is not a directory"));
    }
    std::string root = dir.lexically_normal().string();
    if (root.size() > 1 && root.back() == '/') root.pop_back();
    out.push_back({root, root});
  }
  return out;
}

}  // namespace torchxd::imageproviders
