# A minimal stand-in for TorchX's Python package, for torchx's tests: only the
# APIs cli/component_helper.py calls, with TorchX's behaviour for what the
# tests use. Real TorchX is not a test dependency.
