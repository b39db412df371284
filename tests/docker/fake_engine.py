#!/usr/bin/env python3
"""A fake Docker Engine API on a Unix socket, for local_docker's fault tests.

It serves the calls torchxd makes (version, images, networks, container
create/start/inspect/logs/wait/kill/delete/list) and runs no real process:
a "container" prints what its environment says, then exits. Faults a real
engine shows now and then are chosen per container through its environment:

  FAKE_LINES=N          print "line 1" .. "line N" on stdout (default 0)
  FAKE_INTERVAL=S       seconds between lines (default 0)
  FAKE_STDERR=TEXT      print TEXT on stderr first
  FAKE_EXIT=N           exit code (default 0)
  FAKE_SLEEP=S          run S seconds after the last line before exiting
  FAKE_IGNORE_TERM=1    SIGTERM is ignored (SIGKILL still stops it)
  FAKE_FOLLOW=early     a follow stream ends after the first 3 frames
  FAKE_FOLLOW=forever   a follow stream never ends, not even after the exit
  FAKE_WAIT_ERROR=MSG   the wait answer carries {"Error": {"Message": MSG}}
  FAKE_OUTAGE=S         the first wait is cut and the engine answers nothing
                        (closes every connection) for S seconds, as a
                        restarting or overloaded engine does
  FAKE_START_HANG=S     the first start is held S seconds, then dropped with
                        the container left created (as if torchxd died
                        between create and start)
  FAKE_WAIT_EARLY=N     the first N waits answer at once, StatusCode 0,
                        while the container still runs (a busy podman whose
                        state is not yet synced with its monitor)
  FAKE_START_RACE=S     the first start runs the container but is never
                        answered, and for S seconds the container reads
                        "created" and another start is refused (500: runc
                        "container with given ID already exists"), as podman
                        does while a start it was asked for is under way

POST /fake/outage?seconds=S starts such an outage on demand.

Images: every image is there, except that a name with "missing" in it is not
and cannot be pulled (the pull stream ends with an error), and one with
"slow" is not there until pulled: its pull takes the seconds its tag says
(fake/slow:3; default 2), two layers of 300 and 900 MB, a progress line
each 0.1 s.

Usage: fake_engine.py --socket PATH
"""
import argparse
import json
import os
import select
import socket
import socketserver
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

LOCK = threading.Condition()
CONTAINERS = {}  # name -> Container
NEXT_PID = [1000]
OUTAGE_UNTIL = [0.0]  # time.time() before which every request is dropped unanswered
PULLED = set()  # "slow" images pulled so far
PULLS = [0]  # pulls started (each a request to POST /images/create)


class Container:
    def __init__(self, name, body):
        self.name = name
        self.id = name
        self.env = dict(e.split("=", 1) for e in body.get("Env") or [] if "=" in e)
        self.labels = body.get("Labels") or {}
        self.state = "created"
        self.exit_code = None
        self.frames = []  # (stream, bytes)
        self.pid = 0
        self.stop_signal = None

    def run(self):
        env = self.env
        if env.get("FAKE_STDERR"):
            self.emit(2, (env["FAKE_STDERR"] + "\n").encode())
        interval = float(env.get("FAKE_INTERVAL", "0"))
        for i in range(int(env.get("FAKE_LINES", "0"))):
            if self.stopped():
                return
            self.emit(1, ("line %d\n" % (i + 1)).encode())
            if interval:
                time.sleep(interval)
        end = time.time() + float(env.get("FAKE_SLEEP", "0"))
        while time.time() < end:
            if self.stopped():
                return
            time.sleep(0.02)
        self.exit(int(env.get("FAKE_EXIT", "0")))

    def emit(self, stream, data):
        with LOCK:
            self.frames.append((stream, data))
            LOCK.notify_all()

    def stopped(self):
        with LOCK:
            return self.state == "exited"

    def exit(self, code):
        with LOCK:
            if self.state == "exited":
                return
            self.state = "exited"
            self.exit_code = code
            LOCK.notify_all()

    def starting(self):
        return time.time() < getattr(self, "starting_until", 0.0)

    def inspect(self):
        state = "created" if self.starting() else self.state
        return {
            "Id": self.id,
            "Name": "/" + self.name,
            "State": {
                "Running": state == "running",
                "Pid": self.pid if state == "running" else 0,
                "ExitCode": self.exit_code or 0,
                "Status": state,
            },
            "Config": {"Labels": self.labels},
        }


def frame(stream, data):
    return struct.pack(">BxxxI", stream, len(data)) + data


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p]
        if parts and parts[0].startswith("v1."):
            parts = parts[1:]
        return parts, query

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def dropped(self):
        if self.path.startswith("/fake/") or time.time() >= OUTAGE_UNTIL[0]:
            return False
        self.close_connection = True
        return True

    def do_GET(self):
        if self.dropped():
            return
        parts, query = self.route()
        if parts == ["version"]:
            return self.reply(200, {"ApiVersion": "1.41", "Version": "fake"})
        if parts == ["fake", "pulls"]:
            return self.reply(200, {"pulls": PULLS[0]})
        if len(parts) >= 2 and parts[0] == "images":
            name = urllib.parse.unquote("/".join(parts[1:-1]))
            absent = "missing" in name or ("slow" in name and name not in PULLED)
            return self.reply(404 if absent else 200, {"message": "no such image: " + name} if absent else {})
        if parts[:1] == ["networks"]:
            return self.reply(200, {"Name": parts[1]})
        if parts == ["containers", "json"]:
            return self.list(query)
        if len(parts) == 3 and parts[0] == "containers":
            c = CONTAINERS.get(parts[1])
            if c is None:
                return self.reply(404, {"message": "no such container"})
            if parts[2] == "json":
                with LOCK:
                    return self.reply(200, c.inspect())
            if parts[2] == "logs":
                return self.logs(c, query.get("follow") == ["1"])
        self.reply(404, {"message": "not found: " + self.path})

    def do_POST(self):
        if self.dropped():
            return
        parts, query = self.route()
        body = self.body()
        if parts == ["fake", "outage"]:
            OUTAGE_UNTIL[0] = time.time() + float(query["seconds"][0])
            return self.reply(204)
        if parts == ["networks", "create"]:
            return self.reply(201, {"Id": "net"})
        if parts == ["images", "create"]:
            return self.pull(query["fromImage"][0])
        if parts == ["containers", "create"]:
            name = query["name"][0]
            with LOCK:
                if name in CONTAINERS:
                    return self.reply(409, {"message": "name in use"})
                CONTAINERS[name] = Container(name, body)
            return self.reply(201, {"Id": name})
        if len(parts) == 3 and parts[0] == "containers":
            c = CONTAINERS.get(parts[1])
            if c is None:
                return self.reply(404, {"message": "no such container"})
            if parts[2] == "start":
                if c.starting():
                    return self.reply(500, {"message": "runc: runc create failed: container with given ID already exists: OCI runtime error"})
                race = c.env.get("FAKE_START_RACE")
                if race and not getattr(c, "race_done", False):
                    c.race_done = True
                    c.starting_until = time.time() + float(race)
                    with LOCK:
                        c.state = "running"
                        NEXT_PID[0] += 1
                        c.pid = NEXT_PID[0]
                    threading.Thread(target=c.run, daemon=True).start()
                    time.sleep(float(race))
                    self.close_connection = True
                    return
                if c.env.get("FAKE_START_HANG") and not getattr(c, "hang_done", False):
                    c.hang_done = True
                    time.sleep(float(c.env["FAKE_START_HANG"]))
                    self.close_connection = True
                    return
                with LOCK:
                    c.state = "running"
                    NEXT_PID[0] += 1
                    c.pid = NEXT_PID[0]
                threading.Thread(target=c.run, daemon=True).start()
                return self.reply(204)
            if parts[2] == "kill":
                sig = query.get("signal", ["SIGKILL"])[0]
                with LOCK:
                    running = c.state == "running"
                if not running:
                    return self.reply(409, {"message": "not running"})
                if sig == "SIGTERM" and c.env.get("FAKE_IGNORE_TERM") == "1":
                    return self.reply(204)
                c.exit(143 if sig == "SIGTERM" else 137)
                return self.reply(204)
            if parts[2] == "wait":
                if c.env.get("FAKE_OUTAGE") and not getattr(c, "outage_done", False):
                    c.outage_done = True
                    OUTAGE_UNTIL[0] = time.time() + float(c.env["FAKE_OUTAGE"])
                    self.close_connection = True
                    return
                early = int(c.env.get("FAKE_WAIT_EARLY", "0"))
                if getattr(c, "early_waits", 0) < early:
                    c.early_waits = getattr(c, "early_waits", 0) + 1
                    return self.reply(200, {"StatusCode": 0, "Error": None})
                with LOCK:  # condition=not-running: a created container answers at once
                    while c.state == "running":
                        LOCK.wait(0.5)
                    code = c.exit_code
                error = c.env.get("FAKE_WAIT_ERROR")
                return self.reply(200, {"StatusCode": code, "Error": {"Message": error} if error else None})
        self.reply(404, {"message": "not found: " + self.path})

    def do_DELETE(self):
        if self.dropped():
            return
        parts, _ = self.route()
        if len(parts) == 2 and parts[0] == "containers":
            with LOCK:
                c = CONTAINERS.pop(parts[1], None)
            if c is None:
                return self.reply(404, {"message": "no such container"})
            c.exit(137)
            return self.reply(204)
        self.reply(404, {"message": "not found"})

    def list(self, query):
        wanted = []
        if "filters" in query:
            wanted = json.loads(query["filters"][0]).get("label", [])
        out = []
        with LOCK:
            for c in CONTAINERS.values():
                labels = ["%s=%s" % kv for kv in c.labels.items()]
                if all(w in labels for w in wanted):
                    out.append({"Id": c.id, "Names": ["/" + c.name], "State": c.state, "Labels": c.labels})
        self.reply(200, out)

    def logs(self, c, follow):
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.docker.multiplexed-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        mode = c.env.get("FAKE_FOLLOW", "")
        sent = 0
        try:
            while True:
                with LOCK:
                    while follow and sent == len(c.frames) and c.state != "exited":
                        LOCK.wait(0.5)
                    pending = c.frames[sent:]
                    done = c.state == "exited" or not follow
                for stream, data in pending:
                    if follow and mode == "early" and sent >= 3:
                        return self.end_chunks()
                    self.chunk(frame(stream, data))
                    sent += 1
                if done and sent >= len(c.frames):
                    break
            if follow and mode == "forever":
                while True:  # the exit went unnoticed: the stream stays open until the client leaves
                    readable, _, _ = select.select([self.connection], [], [], 0.5)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        return
            self.end_chunks()
        except (BrokenPipeError, ConnectionResetError, OSError):
            return

    def pull(self, image):
        PULLS[0] += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def line(obj):
            self.chunk(json.dumps(obj).encode() + b"\n")

        try:
            line({"status": "Pulling from " + image.split(":")[0], "id": image.split(":")[-1]})
            if "missing" in image:
                line({"errorDetail": {"message": "pull access denied for " + image},
                      "error": "pull access denied for " + image})
            elif "slow" in image:
                tag = image.rsplit(":", 1)[-1]
                seconds = float(tag) if tag.replace(".", "", 1).isdigit() else 2.0
                layers = {"aaa": 300_000_000, "bbb": 900_000_000}
                for layer in layers:
                    line({"status": "Pulling fs layer", "progressDetail": {}, "id": layer})
                steps = max(1, int(seconds / 0.1))
                for k in range(1, steps + 1):
                    for layer, total in layers.items():
                        line({"status": "Downloading", "progressDetail": {"current": total * k // steps, "total": total},
                              "id": layer})
                    time.sleep(seconds / steps)
                for layer in layers:
                    line({"status": "Pull complete", "progressDetail": {}, "id": layer})
                PULLED.add(image)
                line({"status": "Status: Downloaded newer image for " + image})
            self.end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a cancel): the image stays unpulled

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("local", 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    args = parser.parse_args()
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = Server(args.socket, Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
