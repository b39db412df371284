#include "supervisor/shim_protocol.h"

namespace torchxd::supervisor {

std::string EncodeShimSpec(const ShimSpec& spec) {
  std::string out;
  auto field = [&out](const std::string& s) {
    out += s;
    out += '\0';
  };
  field(spec.cwd);
  field(std::to_string(spec.argv.size()));
  for (const auto& a : spec.argv) field(a);
  field(std::to_string(spec.env.size()));
  for (const auto& e : spec.env) field(e);
  field(std::to_string(spec.credentials.size()));
  for (unsigned c : spec.credentials) field(std::to_string(c));
  return out;
}

}  // namespace torchxd::supervisor
