// TorchX components written in Python (`PATH.py:FUNCTION`, `MODULE:FUNCTION`,
// entry-point components of the `torchx.components` group): materialized by
// the user's own TorchX, through an embedded helper (component_helper.py) run
// with $TORCHX_PYTHON, else python3 on PATH, in the user's cwd and
// environment. One Python start per call; builtins never come here.
//
// Thread contract: single-threaded (the CLI).
#ifndef TORCHXD_CLI_PYTHON_COMPONENT_H_
#define TORCHXD_CLI_PYTHON_COMPONENT_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_context.h"
#include "core/app_def.h"
#include "core/result.h"

namespace torchxd::cli {

struct PythonComponent {
  std::optional<nlohmann::json> app;  // AppDef JSON (docs/appdef-json.md)
  std::optional<int> exit_code;       // argparse ended it: --help (0) or a usage error (2), already printed
};

// A `NAME:FUNCTION` component (a file or a module) or an entry-point name.
// NotFound when TorchX does not know `name`; Unavailable for a missing
// interpreter or `torchx` package (one line naming the interpreter and what
// to install); InvalidArgument for a component that raised (its message).
[[nodiscard]] Result<PythonComponent> MaterializePythonComponent(const std::string& name,
                                                                 const std::vector<std::string>& args,
                                                                 const CliContext& ctx);

struct ComponentListing {
  std::string name;
  std::string description;
};
// The user's entry-point components; empty when the interpreter or its
// `torchx` package is missing (builtins need neither).
std::vector<ComponentListing> ListPythonComponents(const CliContext& ctx);

// True for names that can only be Python components (`A:B`).
bool IsPythonComponentName(const std::string& name);

// A named resource of the user's TorchX (its entry points and plugins), or
// nullopt (unknown there, or no TorchX).
std::optional<core::Resource> PythonNamedResource(const std::string& name, const CliContext& ctx);

// The user's Python for TorchX: $TORCHX_PYTHON, else python3 on PATH.
std::string PythonInterpreter(const CliContext& ctx);
// Replaces this process with `argv` (argv[0] looked up in PATH); returns only
// when that fails, with a one-line error (exit 3 when the interpreter is missing).
int ExecPython(const std::vector<std::string>& argv, const CliContext& ctx);

}  // namespace torchxd::cli

#endif  // TORCHXD_CLI_PYTHON_COMPONENT_H_
