// LineRegex: the `torchx log --regex` filter, in the daemon and the CLI.
//
// RE2 underneath: matching is linear in the line's length whatever the
// pattern, so no pattern and no line (a replica may print megabytes without a
// newline) can stall the daemon's loop or exhaust its stack. The syntax is
// RE2's, which reads like Python's `re` for what log filters use (classes,
// `(?i)`, `(?P<name>...)`, non-greedy repeats); lookarounds and
// backreferences are refused with a message saying so. A line matches when
// the pattern matches anywhere in it (Python's `re.search`, as TorchX).
//
// Thread contract: a compiled LineRegex is immutable and safe to share.
#ifndef TORCHXD_CORE_LINE_REGEX_H_
#define TORCHXD_CORE_LINE_REGEX_H_

#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

namespace re2 {
class RE2;
}

namespace torchxd::core {

class LineRegex {
 public:
  // InvalidArgument naming the pattern and what is wrong with it.
  [[nodiscard]] static Result<LineRegex> Compile(const std::string& pattern);
  bool Matches(std::string_view line) const;

 private:
  explicit LineRegex(std::shared_ptr<const re2::RE2> re) : re_(std::move(re)) {}
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace torchxd::core

#endif  // TORCHXD_CORE_LINE_REGEX_H_
