"""TorchX schedulers backed by the torchxd daemon.

``torchx run -s torchxd …`` and ``get_runner().run(…, scheduler="torchxd")``
hand the AppDef TorchX materialized to the daemon, which runs it, keeps it and
its logs, and lets any later process (either CLI, another notebook, the web
page) find it again. Registered with TorchX both ways it discovers schedulers:
the ``torchx_plugins.schedulers`` namespace package (TorchX 0.8 and later) and
the ``torchx.schedulers`` entry point group (TorchX 0.7 and earlier).
"""

from torchxd.client import DaemonClient, DaemonError

__all__ = ["DaemonClient", "DaemonError"]
__version__ = "0.1.0"
