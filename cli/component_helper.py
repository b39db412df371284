# torchx's Python side, embedded in the torchx binary and run with the user's
# interpreter ($TORCHX_PYTHON, else python3 on PATH) in the user's cwd and
# environment. It finds and materializes a TorchX component with TorchX's own
# APIs (so arguments, --help, defaults and *args parse exactly as in TorchX)
# and writes one JSON object to the file descriptor given as argv[1]:
#   {"app": APPDEF}            the AppDef as torchxd's AppDef JSON (macros unexpanded)
#   {"exit": N}                argparse ended it (--help: 0, a usage error: 2); it printed why
#   {"components": [...]}      `list`: the user's entry-point components
#   {"resource": {...}}        `resource NAME`: a named resource of the user's TorchX
#   {"error": MSG, "kind": K}  K: no_torchx, not_found, component
# Usage: helper FD run NAME [ARGS...] | helper FD list | helper FD resource NAME
# TorchX APIs used: torchx.specs.finder.get_component / get_components,
# torchx.specs.builders.materialize_appdef, torchx.runner.config.load_sections,
# torchx.util.entrypoints.load_group, and the fields of torchx.specs' AppDef,
# Role, Resource, BindMount, VolumeMount, DeviceMount and RetryPolicy.
import importlib
import json
import os
import re
import sys


def _reply(fd, obj):
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(obj, default=str))


def _mount(m):
    kind = type(m).__name__
    if kind == "BindMount":
        return {"type": "bind", "src_path": m.src_path, "dst_path": m.dst_path, "read_only": bool(m.read_only)}
    if kind == "VolumeMount":
        return {"type": "volume", "src": m.src, "dst_path": m.dst_path, "read_only": bool(m.read_only)}
    if kind == "DeviceMount":
        return {"type": "device", "src_path": m.src_path, "dst_path": m.dst_path, "permissions": m.permissions}
    raise TypeError(f"unknown mount type {kind}")


def _role(r):
    res = r.resource
    policy = r.retry_policy
    return {
        "name": r.name,
        "image": r.image,
        "entrypoint": r.entrypoint,
        "args": [str(a) for a in r.args],
        "env": {str(k): str(v) for k, v in r.env.items()},
        "num_replicas": r.num_replicas,
        "min_replicas": r.min_replicas,
        "max_retries": r.max_retries,
        "retry_policy": getattr(policy, "value", policy),
        "resource": {
            "cpu": res.cpu,
            "gpu": res.gpu,
            "memMB": res.memMB,
            "capabilities": dict(res.capabilities),
            "devices": dict(res.devices),
            "tags": dict(getattr(res, "tags", {}) or {}),
        },
        "port_map": dict(r.port_map),
        "metadata": dict(r.metadata),
        "mounts": [_mount(m) for m in r.mounts],
    }


def _appdef(app):
    return {"name": app.name, "metadata": dict(app.metadata), "roles": [_role(r) for r in app.roles]}


def _module_function(name):
    # MODULE:FUNCTION where MODULE is importable and not a file: TorchX reads
    # every A:B as a file path; torchxd also takes a module.
    path, _, fn = name.rpartition(":")
    if os.path.exists(path) or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", path):
        return None
    module = importlib.import_module(path)
    if not hasattr(module, fn):
        raise LookupError(f"module {path} has no function {fn}")
    return getattr(module, fn)


def _run(fd, name, args):
    from torchx.runner import config
    from torchx.specs import builders, finder

    try:
        fn = _module_function(name) if ":" in name else None
        if fn is None:
            fn = finder.get_component(name).fn
    except finder.ComponentNotFoundException as e:
        return _reply(fd, {"error": str(e), "kind": "not_found"})
    except Exception as e:  # the component file raised, or failed TorchX's checks
        return _reply(fd, {"error": f"{type(e).__name__}: {e}", "kind": "component"})
    defaults = config.load_sections(prefix="component").get(name)
    try:
        app = builders.materialize_appdef(fn, args, defaults)
        return _reply(fd, {"app": _appdef(app)})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        return _reply(fd, {"exit": code})
    except Exception as e:
        return _reply(fd, {"error": f"{type(e).__name__}: {e}", "kind": "component"})


def _list(fd):
    from torchx.specs import finder
    from torchx.util import entrypoints

    # Without entry points TorchX lists its own builtins, which torchx has in C++.
    # (TorchX 0.7's load_group takes a default; later ones do not and return {}.)
    try:
        custom = entrypoints.load_group("torchx.components", default={})
    except TypeError:
        custom = entrypoints.load_group("torchx.components")
    if not custom:
        return _reply(fd, {"components": []})
    found = [{"name": c.name, "description": c.description} for c in finder.get_components().values()]
    return _reply(fd, {"components": found})


def _resource(fd, name):
    from torchx import specs

    # specs.named_resources reads TorchX's entry points (and torchx_plugins on 0.8+).
    try:
        r = specs.named_resources[name]
    except Exception as e:
        return _reply(fd, {"error": f"{type(e).__name__}: {e}", "kind": "not_found"})
    return _reply(fd, {"resource": {"cpu": r.cpu, "gpu": r.gpu, "memMB": r.memMB,
                                    "capabilities": dict(r.capabilities), "devices": dict(r.devices)}})


def main():
    fd, mode = int(sys.argv[1]), sys.argv[2]
    try:
        import torchx.runner.config  # noqa: F401
        import torchx.specs.builders  # noqa: F401
        import torchx.specs.finder  # noqa: F401
    except Exception as e:
        return _reply(fd, {"error": f"{type(e).__name__}: {e}", "kind": "no_torchx"})
    if mode == "list":
        return _list(fd)
    if mode == "resource":
        return _resource(fd, sys.argv[3])
    return _run(fd, sys.argv[3], sys.argv[4:])


main()
