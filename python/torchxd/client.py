"""The torchxd protocol (docs/protocol.md) from Python: one JSON object per
line over the daemon's Unix socket, requests answered by zero or more events
and one result or error. Finds the daemon as the torchx CLI does
($TORCHXD_SOCKET, the user daemon, the system daemon) and starts a user daemon
when none answers, unless TORCHX_NO_AUTOSTART=1."""

import json
import os
import shutil
import socket
import subprocess
import time
from typing import Any, Callable, Dict, Iterator, Optional

PROTOCOL_VERSION = 1
SYSTEM_SOCKET = "/run/torchxd/torchxd.sock"
_MAX_FRAME = 16 * 1024 * 1024


class DaemonError(RuntimeError):
    """An error the daemon answered (its code, e.g. ``NotFound``, and message),
    or the daemon could not be reached (code ``Disconnected``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"torchxd: {message}")
        self.code = code
        self.message = message


def user_socket_path(env: Optional[Dict[str, str]] = None) -> str:
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "torchxd", "torchxd.sock")
    return f"/tmp/torchxd-{os.getuid()}/torchxd.sock"


def user_state_dir(env: Optional[Dict[str, str]] = None) -> str:
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME")
    if state:
        return os.path.join(state, "torchxd")
    return os.path.join(env.get("HOME", "/"), ".local", "state", "torchxd")


class DaemonClient:
    """One connection to torchxd. Not thread-safe: one request at a time."""

    def __init__(self, path: str, sock: socket.socket) -> None:
        self.path = path
        self._sock = sock
        self._buf = b""
        self._next_id = 1

    @classmethod
    def connect(cls, path: Optional[str] = None, autostart: bool = True, timeout: float = 10.0) -> "DaemonClient":
        explicit = path or os.environ.get("TORCHXD_SOCKET")
        if explicit:
            return cls._open(explicit, f"torchxd is not answering on {explicit}")
        user = user_socket_path()
        try:
            return cls._open(user, "")
        except DaemonError:
            pass
        if os.path.exists(SYSTEM_SOCKET):
            return cls._open(SYSTEM_SOCKET, f"the system torchxd is not answering on {SYSTEM_SOCKET}; "
                                            "start it with `systemctl start torchxd`")
        if not autostart or os.environ.get("TORCHX_NO_AUTOSTART") == "1":
            raise DaemonError("Disconnected", f"no torchxd is running (looked at {user})"
                              + ("; TORCHX_NO_AUTOSTART=1 is set, so none was started: run `torchxd &`"
                                 if os.environ.get("TORCHX_NO_AUTOSTART") == "1" else ""))
        _start_user_daemon()
        deadline = time.monotonic() + timeout
        while True:
            try:
                return cls._open(user, "")
            except DaemonError:
                if time.monotonic() > deadline:
                    raise DaemonError("Disconnected", f"started torchxd but it did not answer on {user} "
                                      f"within {timeout:g} s; see {user_state_dir()}/torchxd.out")
                time.sleep(0.02)

    @classmethod
    def _open(cls, path: str, what: str) -> "DaemonClient":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError as e:
            s.close()
            raise DaemonError("Disconnected", f"{what or 'torchxd is not answering on ' + path} ({e.strerror or e})")
        return cls(path, s)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "DaemonClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def call(self, method: str, params: Optional[Dict[str, Any]] = None,
             on_event: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        """Sends one request; `on_event` gets each event; returns the result or raises DaemonError."""
        rid = self._next_id
        self._next_id += 1
        frame = json.dumps({"v": PROTOCOL_VERSION, "id": rid, "method": method, "params": params or {}})
        self._sock.sendall(frame.encode() + b"\n")
        for reply in self._frames():
            if reply.get("id") not in (rid, 0):
                continue
            if "event" in reply:
                event = reply["event"]
                if "stopping" in event:
                    raise DaemonError("Disconnected", event["stopping"])
                if on_event is not None:
                    on_event(event)
                continue
            if "error" in reply:
                err = reply["error"]
                raise DaemonError(err.get("code", "Internal"), err.get("message", "unknown error"))
            return reply.get("result") or {}
        raise DaemonError("Disconnected", f"torchxd on {self.path} closed the connection")

    def stream(self, method: str, params: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        """A streaming request's events as an iterator; ends with the result (as an event {"result": …})."""
        rid = self._next_id
        self._next_id += 1
        frame = json.dumps({"v": PROTOCOL_VERSION, "id": rid, "method": method, "params": params})
        self._sock.sendall(frame.encode() + b"\n")
        for reply in self._frames():
            if reply.get("id") not in (rid, 0):
                continue
            if "event" in reply:
                if "stopping" in reply["event"]:
                    raise DaemonError("Disconnected", reply["event"]["stopping"])
                yield reply["event"]
                continue
            if "error" in reply:
                err = reply["error"]
                raise DaemonError(err.get("code", "Internal"), err.get("message", "unknown error"))
            yield {"result": reply.get("result") or {}}
            return
        raise DaemonError("Disconnected", f"torchxd on {self.path} closed the connection")

    def _frames(self) -> Iterator[Dict[str, Any]]:
        while True:
            nl = self._buf.find(b"\n")
            while nl < 0:
                if len(self._buf) > _MAX_FRAME:
                    raise DaemonError("Internal", "a reply frame larger than 16 MiB")
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    return
                self._buf += chunk
                nl = self._buf.find(b"\n")
            line, self._buf = self._buf[:nl], self._buf[nl + 1:]
            if line.strip():
                yield json.loads(line.decode("utf-8", "replace"))


def _start_user_daemon() -> None:
    """Starts torchxd as the torchx CLI does: detached (its own session), its
    output in the state dir."""
    binary = shutil.which("torchxd") or os.environ.get("TORCHXD_BIN")
    if not binary:
        raise DaemonError("Disconnected", "no torchxd is running and no torchxd binary is on PATH to start one")
    state = user_state_dir()
    os.makedirs(state, mode=0o700, exist_ok=True)
    with open(os.path.join(state, "torchxd.out"), "ab") as out:
        subprocess.Popen([binary], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True, close_fds=True)
