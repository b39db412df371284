#include "core/line_regex.h"

#include <re2/re2.h>

namespace torchxd::core {

Result<LineRegex> LineRegex::Compile(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(8 << 20);  // the automaton's memory; a bigger pattern is an error, not a slow match
  auto re = std::make_shared<const RE2>(pattern, options);
  if (!re->ok()) {
    std::string why = re->error();
    if (re->error_code() == RE2::ErrorBadPerlOp || re->error_code() == RE2::ErrorBadEscape) {
      why += " (lookarounds and backreferences are not supported: matching must stay linear in the line)";
    }
    return Fail(Error::InvalidArgument("invalid regex `" + pattern + "`: " + why));
  }
  return LineRegex(std::move(re));
}

bool LineRegex::Matches(std::string_view line) const { return RE2::PartialMatch(line, *re_); }

}  // namespace torchxd::core
