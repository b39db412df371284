import argparse
import inspect
import typing

from torchx.specs import AppDef


def _decode(text, kind):
    origin = typing.get_origin(kind)
    if origin is typing.Union:
        kind = [a for a in typing.get_args(kind) if a is not type(None)][0]
        origin = typing.get_origin(kind)
    if kind is bool:
        return text.lower() == "true"
    if origin is list:
        return text.split(",")
    if origin is dict:
        return dict(item.split("=", 1) for item in text.split(","))
    return kind(text)


def materialize_appdef(cmpnt_fn, cmpnt_args, cmpnt_defaults=None, config=None):
    defaults = cmpnt_defaults or {}
    parser = argparse.ArgumentParser(prog=f"torchx run <run args...> {cmpnt_fn.__name__} ",
                                     description=inspect.getdoc(cmpnt_fn))
    sig = inspect.signature(cmpnt_fn)
    var_args = None
    for name, p in sig.parameters.items():
        if p.kind == p.VAR_POSITIONAL:
            var_args = name
            parser.add_argument(name, nargs=argparse.REMAINDER)
            continue
        default = defaults.get(name, None if p.default is p.empty else p.default)
        required = p.default is p.empty and name not in defaults
        parser.add_argument(f"--{name}", type=str, default=None if default is None else str(default), required=required)
    parsed = parser.parse_args(cmpnt_args)
    kwargs, positional = {}, []
    for name, p in sig.parameters.items():
        if name == var_args:
            continue
        text = getattr(parsed, name)
        value = None if text is None else _decode(text, p.annotation)
        if p.kind == p.POSITIONAL_OR_KEYWORD and var_args is not None:
            positional.append(value)
        else:
            kwargs[name] = value
    rest = getattr(parsed, var_args) if var_args else []
    if rest and rest[0] == "--":
        rest = rest[1:]
    appdef = cmpnt_fn(*positional, *rest, **kwargs)
    if not isinstance(appdef, AppDef):
        raise TypeError(f"Expected a component that returns `AppDef`, but got `{type(appdef)}`")
    return appdef
