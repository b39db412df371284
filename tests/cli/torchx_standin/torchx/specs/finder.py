import inspect
import os
from dataclasses import dataclass
from typing import Callable, Dict

from torchx.specs import AppDef
from torchx.util import entrypoints


class ComponentNotFoundException(Exception):
    pass


class ComponentValidationException(Exception):
    pass


@dataclass
class _Component:
    name: str
    description: str
    fn_name: str
    fn: Callable[..., AppDef]


def _describe(fn):
    return (inspect.getdoc(fn) or fn.__name__).splitlines()[0]


def get_components() -> Dict[str, _Component]:
    found = {}
    for alias, load in (entrypoints.load_group("torchx.components", default={}) or {}).items():
        module = load()
        prefix = "" if alias.startswith("_") else alias + "."
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            if inspect.signature(fn).return_annotation is AppDef and not fn_name.startswith("_"):
                found[prefix + fn_name] = _Component(prefix + fn_name, _describe(fn), fn_name, fn)
    return found


def get_component(name: str) -> _Component:
    if ":" in name:
        path, fn_name = name.split(":")
        with open(path) as f:
            source = f.read()
        namespace = {"__file__": os.path.abspath(path), "__name__": "__torchx_component__"}
        exec(compile(source, path, "exec"), namespace)
        if fn_name not in namespace:
            raise ComponentNotFoundException(f"Function {fn_name} does not exist in file {path}")
        fn = namespace[fn_name]
        return _Component(name, _describe(fn), fn_name, fn)
    components = get_components()
    if name not in components:
        raise ComponentNotFoundException(f"Component `{name}` not found")
    return components[name]
