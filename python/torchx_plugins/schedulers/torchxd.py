"""torchxd's schedulers for TorchX 0.8 and later (the ``torchx_plugins``
namespace package). Once any scheduler plugin is installed TorchX lists only
the plugins' schedulers, so TorchX's own are registered here again."""

import importlib
from typing import Any

from torchx.plugins import register


@register.scheduler()
def torchxd(session_name: str, **kwargs: Any) -> Any:
    from torchxd.scheduler import create_scheduler

    return create_scheduler(session_name, **kwargs)


@register.scheduler()
def torchxd_docker(session_name: str, **kwargs: Any) -> Any:
    from torchxd.scheduler import create_docker_scheduler

    return create_docker_scheduler(session_name, **kwargs)


@register.scheduler()
def torchxd_kubernetes(session_name: str, **kwargs: Any) -> Any:
    from torchxd.scheduler import create_kubernetes_scheduler

    return create_kubernetes_scheduler(session_name, **kwargs)


@register.scheduler()
def torchxd_slurm(session_name: str, **kwargs: Any) -> Any:
    from torchxd.scheduler import create_slurm_scheduler

    return create_slurm_scheduler(session_name, **kwargs)


def _torchx_own(module: str) -> Any:
    def factory(session_name: str, **kwargs: Any) -> Any:
        return importlib.import_module(module).create_scheduler(session_name, **kwargs)

    return factory


local_docker = register.scheduler("local_docker")(_torchx_own("torchx.schedulers.docker_scheduler"))
local_cwd = register.scheduler("local_cwd")(_torchx_own("torchx.schedulers.local_scheduler"))
slurm = register.scheduler("slurm")(_torchx_own("torchx.schedulers.slurm_scheduler"))
kubernetes = register.scheduler("kubernetes")(_torchx_own("torchx.schedulers.kubernetes_scheduler"))
