// Image providers (TorchX's ImageProvider): where a role of a local app runs.
//   local_cwd: the image is ignored; img_root and cwd are the client's cwd.
//   local_dir: the image is an existing directory (relative to the client's
//              cwd); it is img_root and cwd. Otherwise TorchX's error
//              "Invalid image name: X, does not exist or is not a directory".
//
// Thread contract: stat()s the image path; call from any thread.
#ifndef TORCHXD_IMAGEPROVIDERS_IMAGE_PROVIDER_H_
#define TORCHXD_IMAGEPROVIDERS_IMAGE_PROVIDER_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/app_def.h"
#include "core/replica_request.h"
#include "core/result.h"

namespace torchxd::imageproviders {

// One location per role of `app`, for `scheduler` (local_cwd or local_dir).
[[nodiscard]] Result<std::vector<core::RoleLocation>> FetchRoles(std::string_view scheduler,
                                                                 const core::AppDef& app,
                                                                 const std::string& client_cwd);

}  // namespace torchxd::imageproviders

#endif  // TORCHXD_IMAGEPROVIDERS_IMAGE_PROVIDER_H_
