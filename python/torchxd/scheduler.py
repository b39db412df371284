"""TorchX's Scheduler API against the torchxd daemon.

``torchxd`` runs the app as torchxd's ``local_cwd`` (processes on this box,
``-cfg`` as ``torchx runopts local_cwd`` of torchxd); ``torchxd_docker`` and
``torchxd_kubernetes`` and ``torchxd_slurm`` as its ``local_docker``, ``kubernetes`` and ``slurm``. The AppDef
TorchX materialized is sent as torchxd's AppDef JSON (macros unexpanded: the
daemon applies them), and every later call (describe, logs, list, cancel,
delete) asks the daemon, so the job outlives the process that submitted it and
any process (either CLI, a notebook, the web page) finds it again."""

import os
import re
from collections import deque
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.specs import AppDef, AppDryRunInfo, AppState, Resource, Role, RoleStatus, ReplicaStatus, runopts

from torchxd.client import DaemonClient, DaemonError

# TorchX scheduler name -> the daemon's scheduler.
DAEMON_SCHEDULERS = {"torchxd": "local_cwd", "torchxd_docker": "local_docker", "torchxd_kubernetes": "kubernetes",
                     "torchxd_slurm": "slurm"}

_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "list[str]": List[str], "dict[str, str]": Dict[str, str]}


def _mount(m: Any) -> Dict[str, Any]:
    kind = type(m).__name__
    if kind == "BindMount":
        return {"type": "bind", "src_path": m.src_path, "dst_path": m.dst_path, "read_only": bool(m.read_only)}
    if kind == "VolumeMount":
        return {"type": "volume", "src": m.src, "dst_path": m.dst_path, "read_only": bool(m.read_only)}
    if kind == "DeviceMount":
        return {"type": "device", "src_path": m.src_path, "dst_path": m.dst_path, "permissions": m.permissions}
    raise TypeError(f"torchxd: unknown mount type {kind}")


def appdef_json(app: AppDef) -> Dict[str, Any]:
    """The AppDef as torchxd's AppDef JSON (docs/appdef-json.md)."""
    roles = []
    for r in app.roles:
        res = r.resource
        policy = r.retry_policy
        roles.append({
            "name": r.name,
            "image": r.image,
            "entrypoint": r.entrypoint,
            "args": [str(a) for a in r.args],
            "env": {str(k): str(v) for k, v in r.env.items()},
            "num_replicas": r.num_replicas,
            "min_replicas": r.min_replicas,
            "max_retries": r.max_retries,
            "retry_policy": getattr(policy, "value", policy),
            "resource": {"cpu": res.cpu, "gpu": res.gpu, "memMB": res.memMB,
                         "capabilities": dict(res.capabilities), "devices": dict(res.devices),
                         "tags": dict(getattr(res, "tags", {}) or {})},
            "port_map": dict(r.port_map),
            "metadata": {str(k): v for k, v in r.metadata.items()},
            "mounts": [_mount(m) for m in r.mounts],
        })
    return {"name": app.name, "metadata": {str(k): str(v) for k, v in app.metadata.items()}, "roles": roles}


def _role(j: Dict[str, Any]) -> Role:
    res = j.get("resource") or {}
    resource = Resource(cpu=res.get("cpu", -1), gpu=res.get("gpu", -1), memMB=res.get("memMB", -1),
                        capabilities=res.get("capabilities") or {}, devices=res.get("devices") or {})
    return Role(name=j["name"], image=j.get("image", ""), entrypoint=j.get("entrypoint", ""),
                args=list(j.get("args") or []), env=dict(j.get("env") or {}), num_replicas=j.get("num_replicas", 1),
                max_retries=j.get("max_retries", 0), resource=resource, port_map=dict(j.get("port_map") or {}))


def _ms(t: Optional[datetime]) -> Optional[int]:
    return None if t is None else int(t.timestamp() * 1000)


class TorchxdScheduler(Scheduler):
    """A TorchX scheduler whose jobs the torchxd daemon runs and keeps."""

    def __init__(self, session_name: str, backend: str = "torchxd", socket: Optional[str] = None) -> None:
        super().__init__(backend, session_name)
        self.daemon_scheduler = DAEMON_SCHEDULERS[backend]
        self._socket = socket
        self._opts: Optional[runopts] = None

    def _client(self) -> DaemonClient:
        return DaemonClient.connect(self._socket)

    def _call(self, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
        with self._client() as c:
            return c.call(method, params)

    def _handle(self, app_id: str) -> str:
        return f"{self.daemon_scheduler}://{self.session_name}/{app_id}"

    # ---- submit -------------------------------------------------------------
    def _run_opts(self) -> runopts:
        # The daemon's own options for its scheduler, as `torchx runopts` of torchxd shows them.
        if self._opts is None:
            opts = runopts()
            reply = self._call("runopts", {"scheduler": self.daemon_scheduler, "detail": True})
            for o in reply[self.daemon_scheduler]["options"]:
                opts.add(o["name"], type_=_TYPES.get(o["type"], str), help=o["help"],
                         default=o["default"], required=o["required"])
            self._opts = opts
        return self._opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo:
        request = {
            "app": appdef_json(app),
            "scheduler": self.daemon_scheduler,
            "cfg": {k: v for k, v in cfg.items() if v is not None},
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "session": self.session_name,
        }
        shown = dict(request, env="<the client's environment>")
        return AppDryRunInfo(request, lambda _: _pretty(shown))

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        reply = self._call("run", dryrun_info.request)
        return reply["app_id"]

    def _validate(self, app: AppDef, scheduler: str, cfg: Any = None) -> None:
        # As TorchX's local_cwd: a role without a resource runs (the daemon checks the rest at submit).
        pass

    # ---- what the daemon knows ----------------------------------------------
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        try:
            with self._client() as c:
                st = c.call("status", {"app_handle": self._handle(app_id)})
                desc = c.call("describe", {"app_handle": self._handle(app_id)})
        except DaemonError as e:
            if e.code == "NotFound":
                return None
            raise
        roles_statuses = []
        for role in st.get("roles", []):
            replicas = [ReplicaStatus(id=r["id"], state=AppState[r.get("state_name", "UNKNOWN")], role=role["role"],
                                      hostname=r.get("hostname") or "",
                                      structured_error_msg=r.get("structured_error_msg") or "<NONE>")
                        for r in role.get("replicas", [])]
            roles_statuses.append(RoleStatus(role["role"], replicas))
        return DescribeAppResponse(
            app_id=app_id,
            state=AppState[st["state"]],
            num_restarts=st.get("num_restarts", 0),
            msg=st.get("msg") or "",
            structured_error_msg=st.get("structured_error_msg") or "<NONE>",
            ui_url=st.get("page_url") or st.get("url"),
            roles_statuses=roles_statuses,
            roles=[_role(r) for r in desc.get("app", {}).get("roles", [])],
        )

    def list(self, cfg: Optional[Mapping[str, Any]] = None) -> List[ListAppResponse]:
        reply = self._call("list", {"scheduler": self.daemon_scheduler})
        fields = reply["fields"]
        out = []
        for row in reply["apps"]:
            a = dict(zip(fields, row))
            one = ListAppResponse(app_id=a["app_id"], state=AppState[a["state"]],
                                  app_handle=f"{self.backend}://{self.session_name}/{a['app_id']}")
            if hasattr(one, "name"):
                one.name = a.get("name", "")
            out.append(one)
        return out

    def _cancel_existing(self, app_id: str) -> None:
        self._call("cancel", {"app_handle": self._handle(app_id)})

    def _delete_existing(self, app_id: str) -> None:
        self._call("delete", {"app_handle": self._handle(app_id)})

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Optional[datetime] = None, until: Optional[datetime] = None,
                 should_tail: bool = False, streams: Optional[Stream] = None) -> Iterable[str]:
        params: Dict[str, Any] = {"app_handle": self._handle(app_id), "role": role_name, "replicas": [k],
                                  "follow": bool(should_tail)}
        if streams is not None:
            params["stream"] = getattr(streams, "value", streams)
        if since is not None:
            params["since_ms"] = _ms(since)
        if until is not None:
            params["until_ms"] = _ms(until)
        # Python's re, as TorchX filters (the daemon's RE2 refuses lookarounds).
        pattern = re.compile(regex) if regex else None
        return _Lines(self._client(), params, pattern)


class _Lines:
    """The replica's log lines as they come (`\\n`-terminated, as TorchX's log_iter)."""

    def __init__(self, client: DaemonClient, params: Dict[str, Any], pattern: Optional["re.Pattern[str]"]) -> None:
        self._client = client
        self._events = client.stream("log", params)
        self._pattern = pattern
        self._pending: "deque[str]" = deque()

    def __iter__(self) -> "_Lines":
        return self

    def __next__(self) -> str:
        while not self._pending:
            try:
                event = next(self._events)
            except StopIteration:
                self._client.close()
                raise
            except DaemonError:
                self._client.close()
                raise
            if "result" in event:
                self._client.close()
                raise StopIteration
            for _, text in event.get("lines", []):
                if self._pattern is None or self._pattern.search(text):
                    self._pending.append(text + "\n")
        return self._pending.popleft()


def _pretty(request: Dict[str, Any]) -> str:
    import json

    return json.dumps(request, indent=2, sort_keys=True)


def create_scheduler(session_name: str, **kwargs: Any) -> TorchxdScheduler:
    return TorchxdScheduler(session_name, "torchxd")


def create_docker_scheduler(session_name: str, **kwargs: Any) -> TorchxdScheduler:
    return TorchxdScheduler(session_name, "torchxd_docker")


def create_kubernetes_scheduler(session_name: str, **kwargs: Any) -> TorchxdScheduler:
    return TorchxdScheduler(session_name, "torchxd_kubernetes")


def create_slurm_scheduler(session_name: str, **kwargs: Any) -> TorchxdScheduler:
    return TorchxdScheduler(session_name, "torchxd_slurm")
