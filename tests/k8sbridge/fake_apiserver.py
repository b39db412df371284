#!/usr/bin/python3
"""A fake kube-apiserver with Volcano, for torchxd's Kubernetes bridge tests.

usage: fake_apiserver.py [--schemas DIR] [--token TOKEN] [--tls-cert PEM --tls-key PEM] [--no-webhook]
                         --port-file FILE

Serves on 127.0.0.1 (a free port, written to --port-file) what the bridge uses:
  Volcano Jobs     POST (with ?dryRun=All), GET, DELETE, PATCH (JSON Patch: replace/test), list
                   and watch; Volcano's admission webhook rules (unique task names, task and job
                   minAvailable within replicas, dependsOn naming tasks and forming a DAG; an
                   update changes only minAvailable, tasks[*].replicas and priorityClassName);
                   pods of a task with dependsOn are created once the tasks it names run, and a
                   task's replicas lowered deletes its pods. --no-webhook: an apiserver with the
                   CRDs but without Volcano's webhook (what the golden answers came from)
  Commands         POST (bus.volcano.sh; AbortJob aborts the Job)
  Pods             list and watch; GET .../pods/NAME/log (follow, timestamps, sinceTime);
                   POST ?dryRun=All (the Pod API's name rules, as the apiserver words them)
  Queues           GET (Volcano's, cluster-scoped; `default` exists and is Open)
  ServiceAccounts  GET (`default` exists in every namespace)
With --schemas (../shared/k8s-schemas) created objects are checked against
the real CRDs as the v1.24 apiserver of the golden files does: a violation is
a 422 Invalid Status naming the fields, unknown fields are pruned (and
recorded, so tests can insist there are none).

Tests drive the "controller" and "kubelet" through /fake/...:
  POST /fake/jobs/NS               {job} (created as by another client: no dry run, no token)
  POST /fake/jobs/NS/NAME/vanish  (gone without a watch event, as across a compaction)
  POST /fake/jobs/NS/NAME/delete  (kubectl delete vcjob: the Job goes, then the garbage collector
                                  deletes its pods gracefully: each gets a deletionTimestamp, its
                                  containers end (exit 143), and it is removed after the gc delay)
  POST /fake/jobs/NS/NAME/sidecar {"name": "log-agent"} (the Job's pods get this container first)
  POST /fake/gc-delay             {"seconds": N} (a deleted Job's pods stay that long; default 0)
  POST /fake/namespaces/NAME      (creates a namespace; default, team and other exist)
  POST /fake/jobs/NS/NAME/phase   {"phase": "Running"}  (Running creates the pods;
                                  "pods": "Pending" creates them Pending, no container started)
  POST /fake/pods/NS/NAME/log     {"lines": ["..."]} (the main container's: the one named as the task;
                                  a pod of several containers answers a log GET without ?container=
                                  with the apiserver's 400, and a sidecar's log is empty)
  POST /fake/pods/NS/NAME/phase   {"phase": "Failed", "exitCode": 3}
  POST /fake/pods/NS/NAME/restart (a new pod, new uid, job retryCount + 1)
  POST /fake/pods/NS/NAME/delete  (the pod is deleted, nothing replaces it)
  POST /fake/pods/NS/NAME/status  {"phase": ..., "reason": ..., "containerStatuses": [...]} (merged into status;
                                   "nodeName" binds it: spec.nodeName)
  POST /fake/pods/NS/NAME/log-fail {"code": 500, "message": "..."} (its log GETs fail so; code 0 = they work)
  POST /fake/queues/NAME           {"state": "Open" | "Closed"} (creates or changes a queue)
  POST /fake/serviceaccounts/NS/NAME
  POST /fake/reject-next-pod       {"code": 422 | 403, "reason", "message"} (the next pod dry run)
  POST /fake/forbid                {"resource": "pods" | "queues" | "serviceaccounts"} (RBAC says no)
  POST /fake/outage               {"seconds": N} (503s and dropped watches meanwhile)
  POST /fake/reject-next          {"code": 422, "reason", "field", "message"} (next Job create)
  POST /fake/watches/expire       {"how": "event" | "http"}
  POST /fake/watches/drop         (close every watch stream)
  POST /fake/watches/end-at-once  {"on": true | false} (every watch is answered 200 and ended, empty)
  POST /fake/logs/drop            (close every log stream)
  POST /fake/logs/hold-follows    {"seconds": N} (follows start sending only then)
  POST /fake/patch-answer-delay   {"seconds": N} (a Job PATCH is answered N s after its watch events)
  GET  /fake/state                (jobs, pods, commands, requests, pruned fields)
"""
import argparse
import copy
import datetime
import http.server
import json
import os
import re
import threading
import time
import urllib.parse
import uuid

LOCK = threading.Condition()
STATE = {
    "rv": 1,
    "min_watch_rv": 0,  # watches from an older version get HTTP 410
    "jobs": {},  # (ns, name) -> object
    "pods": {},  # (ns, name) -> object
    "commands": [],
    "events": [],  # (rv, kind, ns, type, object)
    "logs": {},  # (ns, pod, uid) -> [(ns_time, text)]
    "requests": [],
    "pruned": [],
    "expire_event": 0,  # generation: watches older than this send a 410 ERROR event
    "drop_watch": 0,
    "drop_logs": 0,
    "watch_starts": 0,  # watches that got past their checks and stream
    "watch_end_at_once": False,
    "reject_next": None,
    "outage_until": 0.0,
    "hold_follow_until": 0.0,
    "log_fail": {},  # (ns, pod) -> Status that the pod's log requests get
    "pending_pods": set(),  # (ns, job): pods created Pending
    "queues": {"default": "Open"},
    "service_accounts": set(),  # (ns, name); `default` exists everywhere
    "reject_next_pod": None,
    "patch_answer_delay": 0.0,
    "namespaces": {"default", "team", "other", "kube-system"},  # others answer 404 NotFound
    "sidecars": {},  # (ns, job) -> a container name its pods get first
    "gc_delay": 0.0,
    "forbidden": set(),  # resources the caller may not touch  # log follows send nothing before then (a slow kubelet)  # until then every API request gets a 503 and watches drop  # a Status the next Job create answers with (an admission rejection)
}
VALIDATORS = {}
TOKEN = None
WEBHOOK = True


def now_rfc3339(nanos=False):
    t = datetime.datetime.now(datetime.timezone.utc)
    if nanos:
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%09dZ" % (t.microsecond * 1000 + (time.time_ns() % 1000))
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def load_validators(schema_dir):
    import jsonschema  # noqa: only with --schemas
    import yaml
    from validate_crd import strict
    for kind, file in (("jobs", "batch.volcano.sh_jobs.yaml"), ("commands", "bus.volcano.sh_commands.yaml")):
        with open(os.path.join(schema_dir, "volcano", file)) as f:
            crd = yaml.safe_load(f)
        schema = strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        schema.setdefault("properties", {})["metadata"] = {"type": "object"}
        VALIDATORS[kind] = jsonschema.Draft7Validator(schema)


def prune(obj, path):
    parent = obj
    for p in list(path)[:-1]:
        parent = parent[p]
    parent.pop(path[-1], None)


def validate(kind, group_kind, obj):
    """None when valid (after pruning unknown fields), else a 422 Status."""
    v = VALIDATORS.get(kind)
    if v is None:
        return None
    causes = []
    for e in sorted(v.iter_errors(obj), key=lambda e: list(e.path)):
        field = ".".join(str(p) for p in e.path if not isinstance(p, int))
        if e.validator == "additionalProperties":
            extra = [k for k in e.instance if k not in e.schema.get("properties", {})]
            for k in extra:
                STATE["pruned"].append((field + "." if field else "") + k)
                prune(obj, list(e.path) + [k])
            continue
        causes.append({"reason": "FieldValueInvalid", "message": "Invalid value: " + e.message[:200],
                       "field": field})
    if not causes:
        return None
    name = obj.get("metadata", {}).get("name", "")
    msg = '%s "%s" is invalid: %s' % (group_kind, name,
                                      ", ".join(c["field"] + ": " + c["message"] for c in causes))
    return status(422, "Invalid", msg, {"name": name, "group": group_kind.split(".", 1)[1],
                                        "kind": group_kind.split(".")[0], "causes": causes})


ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def port_name_problem(name):
    if len(name) > 15:
        return "must be no more than 15 characters"
    if not re.match(r"^[-a-z0-9]+$", name):
        return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
    if not re.search(r"[a-z]", name):
        return "must contain at least one letter (a-z)"
    if "--" in name:
        return "must not contain consecutive hyphens"
    if name.startswith("-") or name.endswith("-"):
        return "must not begin or end with a hyphen"
    return None


def pod_causes(pod):
    """The Pod API's verdicts for the rules a Job's dry run does not apply (a subset)."""
    causes = []

    def invalid(field, value, why):
        causes.append({"reason": "FieldValueInvalid", "field": field,
                       "message": 'Invalid value: "%s": %s' % (value, why)})
    for k, v in (pod.get("metadata", {}).get("labels") or {}).items():
        if len(v) > 63 or not LABEL_VALUE.match(v):
            invalid("metadata.labels", v, "a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric character")
    for i, c in enumerate(pod.get("spec", {}).get("containers", [])):
        for j, e in enumerate(c.get("env", [])):
            if not ENV_NAME.match(e.get("name", "")):
                invalid("spec.containers[%d].env[%d].name" % (i, j), e.get("name", ""),
                        "a valid environment variable name must consist of alphabetic characters, digits, '_', "
                        "'-', or '.', and must not start with a digit")
        for j, p in enumerate(c.get("ports", [])):
            problem = p.get("name") and port_name_problem(p["name"])
            if problem:
                invalid("spec.containers[%d].ports[%d].name" % (i, j), p["name"], problem)
    return causes


def emit(kind, ns, etype, obj):
    """Records a change; the caller holds LOCK."""
    STATE["rv"] += 1
    obj["metadata"]["resourceVersion"] = str(STATE["rv"])
    STATE["events"].append((STATE["rv"], kind, ns, etype, copy.deepcopy(obj)))
    LOCK.notify_all()


def matches(obj, selector):
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    for term in filter(None, selector.split(",")):
        k, _, want = term.partition("=")
        if labels.get(k) != want:
            return False
    return True


def webhook_denial(message):
    return status(400, "BadRequest", 'admission webhook "validatejob.volcano.sh" denied the request: ' + message)


def volcano_webhook(job, old=None):
    """None when Volcano's validating webhook admits the Job (or the update), else its message."""
    if not WEBHOOK:
        return None
    spec = job.get("spec", {})
    tasks = spec.get("tasks", [])
    names = [t.get("name", "") for t in tasks]
    if len(set(names)) != len(names):
        return "duplicated task name"
    total = 0
    for t in tasks:
        replicas = t.get("replicas", 0)
        total += replicas
        if t.get("minAvailable", replicas) > replicas:
            return "'minAvailable' is greater than 'replicas' in task: %s, job: %s" % (
                t["name"], job.get("metadata", {}).get("name", ""))
    if spec.get("minAvailable", 0) > total:
        return "job 'minAvailable' should not be greater than total replicas in tasks"
    deps = {t["name"]: t.get("dependsOn", {}).get("name", []) for t in tasks}
    for task, wants in deps.items():
        for w in wants:
            if w not in deps:
                return "task %s depends on an unknown task %s" % (task, w)
    seen, done = set(), set()

    def cyclic(t):
        if t in done:
            return False
        if t in seen:
            return True
        seen.add(t)
        if any(cyclic(w) for w in deps[t]):
            return True
        done.add(t)
        return False
    if any(cyclic(t) for t in deps):
        return "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG)"
    if old is not None and WEBHOOK:
        before, after = copy.deepcopy(old.get("spec", {})), copy.deepcopy(spec)
        if len(before.get("tasks", [])) != len(after.get("tasks", [])):
            return "job updates may not add or remove tasks"
        for o in (before, after):
            o.pop("minAvailable", None)
            o.pop("priorityClassName", None)
            for t in o.get("tasks", []):
                t.pop("replicas", None)
        if before != after:
            return "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec`"
    return None


def task_pods(ns, job_name, task):
    return [p for k, p in STATE["pods"].items() if k[0] == ns
            and p["metadata"]["labels"].get("volcano.sh/job-name") == job_name
            and p["metadata"]["labels"].get("volcano.sh/task-spec") == task]


def sync_pods(ns, job):
    """What Volcano's job controller does for a running Job: each task gets its replicas' pods,
    a task with dependsOn only once every pod of the tasks it names runs; lowered replicas
    delete the pods beyond them."""
    name = job["metadata"]["name"]
    if job.get("status", {}).get("state", {}).get("phase") != "Running":
        return
    changed = True
    while changed:
        changed = False
        for task in job["spec"].get("tasks", []):
            pods = task_pods(ns, name, task["name"])
            replicas = task.get("replicas", 1)
            for pod in pods:
                index = int(pod["metadata"]["name"].rsplit("-", 1)[1])
                if index >= replicas:
                    emit("pods", ns, "DELETED", STATE["pods"].pop((ns, pod["metadata"]["name"])))
            present = {int(p["metadata"]["name"].rsplit("-", 1)[1]) for p in task_pods(ns, name, task["name"])}
            wants = task.get("dependsOn", {}).get("name", [])
            ready = all(len([p for p in task_pods(ns, name, w) if p["status"].get("phase") == "Running"]) >=
                        next(t.get("replicas", 1) for t in job["spec"]["tasks"] if t["name"] == w) for w in wants)
            if not ready or (wants and present):
                continue  # a dependent task's pods come all at once, when its upstream runs
            for i in range(replicas):
                if i not in present:
                    new_pod(ns, job, task, i)
                    changed = True


def main_container(pod):
    """The container named as the pod's task (torchx's layout), else the first."""
    names = [c["name"] for c in pod["spec"]["containers"]]
    task = pod["metadata"]["labels"].get("volcano.sh/task-spec")
    return task if task in names else (names[0] if names else "main")


def missing_namespace(ns):
    if ns in STATE["namespaces"]:
        return None
    return status(404, "NotFound", 'namespaces "%s" not found' % ns, {"name": ns, "kind": "namespaces"})


def delete_job(ns, name):
    """Under LOCK: the Job goes at once; its pods as the garbage collector deletes them."""
    job = STATE["jobs"].pop((ns, name))
    emit("jobs", ns, "DELETED", job)
    keys = [k for k, p in STATE["pods"].items()
            if k[0] == ns and p["metadata"]["labels"].get("volcano.sh/job-name") == name]
    for key in keys:
        pod = STATE["pods"][key]
        pod["metadata"]["deletionTimestamp"] = now_rfc3339()
        pod["metadata"]["deletionGracePeriodSeconds"] = 30
        emit("pods", ns, "MODIFIED", pod)

    def remove():
        with LOCK:
            for key in keys:
                pod = STATE["pods"].get(key)
                if pod is None:
                    continue
                if pod["status"].get("phase") not in ("Succeeded", "Failed"):
                    set_pod_phase(key, "Failed", 143)
                emit("pods", ns, "DELETED", STATE["pods"].pop(key))
            LOCK.notify_all()
    if STATE["gc_delay"] > 0:
        threading.Timer(STATE["gc_delay"], remove).start()
    else:
        remove()


def new_pod(ns, job, task, index):
    name = job["metadata"]["name"]
    template = task.get("template", {})
    labels = dict(template.get("metadata", {}).get("labels", {}) or {})
    labels.update({"volcano.sh/job-name": name, "volcano.sh/job-namespace": ns,
                   "volcano.sh/task-spec": task["name"]})
    pod_name = "%s-%s-%d" % (name, task["name"], index)
    containers = list(template.get("spec", {}).get("containers", []))
    main = containers[0]["name"] if containers else "main"
    sidecar = STATE["sidecars"].get((ns, name))
    if sidecar:
        containers.insert(0, {"name": sidecar, "image": "busybox"})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": pod_name, "namespace": ns, "uid": str(uuid.uuid4()), "labels": labels},
           "spec": {"containers": [{"name": c.get("name", "main"), "image": c.get("image", "")} for c in containers]},
           "status": {"phase": "Running", "podIP": "10.244.0.%d" % (len(STATE["pods"]) % 250 + 2),
                      "startTime": now_rfc3339(),
                      "containerStatuses": [{"name": c["name"], "state": {"running": {"startedAt": now_rfc3339()}}}
                                            for c in containers] or
                                           [{"name": main, "state": {"running": {"startedAt": now_rfc3339()}}}]}}
    if (ns, name) in STATE["pending_pods"]:
        pod["status"] = {"phase": "Pending", "containerStatuses": [
            {"name": c["name"], "state": {"waiting": {"reason": "ContainerCreating"}}} for c in containers]}
    STATE["pods"][(ns, pod_name)] = pod
    emit("pods", ns, "ADDED", pod)
    return pod


def set_pod_phase(key, phase, exit_code):
    pod = STATE["pods"][key]
    pod["status"]["phase"] = phase
    if phase in ("Succeeded", "Failed") and pod["status"].get("containerStatuses"):
        for c in pod["status"]["containerStatuses"]:
            c["state"] = {"terminated": {"exitCode": exit_code if c["name"] == main_container(pod) else 0,
                                         "reason": "Completed" if exit_code == 0 else "Error",
                                         "finishedAt": now_rfc3339()}}
    emit("pods", key[0], "MODIFIED", pod)
    job = STATE["jobs"].get((key[0], pod["metadata"]["labels"].get("volcano.sh/job-name")))
    if job is not None and phase == "Running":
        sync_pods(key[0], job)


def set_job_phase(ns, name, phase):
    job = STATE["jobs"][(ns, name)]
    job.setdefault("status", {}).setdefault("state", {})["phase"] = phase
    emit("jobs", ns, "MODIFIED", job)
    if phase == "Running" and not any(k[0] == ns and p["metadata"]["labels"].get("volcano.sh/job-name") == name
                                      for k, p in STATE["pods"].items()):
        sync_pods(ns, job)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else {}

    def route(self, method):
        url = urllib.parse.urlparse(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        if parts[0] != "fake":
            with LOCK:
                STATE["requests"].append({"method": method, "path": url.path, "query": query, "t": time.time()})
            if TOKEN and self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
            if time.time() < STATE["outage_until"]:
                return self.send_json(503, status(503, "ServiceUnavailable", "the fake apiserver is down"))
        try:
            return self.dispatch(method, parts, query)
        except (BrokenPipeError, ConnectionResetError):
            return None

    def dispatch(self, method, parts, query):
        if parts[0] == "fake":
            return self.control(method, parts[1:])
        # /apis/batch.volcano.sh/v1alpha1/namespaces/NS/jobs[/NAME]
        if parts[:3] == ["apis", "batch.volcano.sh", "v1alpha1"] and len(parts) >= 6 and parts[5] == "jobs":
            return self.jobs(method, parts[4], parts[6] if len(parts) > 6 else None, query)
        if parts[:3] == ["apis", "bus.volcano.sh", "v1alpha1"] and len(parts) == 6 and parts[5] == "commands":
            return self.commands(method, parts[4])
        if parts[:3] == ["apis", "scheduling.volcano.sh", "v1beta1"] and len(parts) == 5 and parts[3] == "queues":
            return self.queue(parts[4])
        if parts[:2] == ["api", "v1"] and len(parts) == 6 and parts[4] == "serviceaccounts" and method == "GET":
            return self.service_account(parts[3], parts[5])
        if parts[:2] == ["api", "v1"] and len(parts) >= 5 and parts[4] == "pods":
            if len(parts) == 7 and parts[6] == "log":
                return self.pod_log(parts[3], parts[5], query)
            if len(parts) == 5 and method == "GET":
                return self.collection("pods", parts[3], query)
            if len(parts) == 5 and method == "POST" and query.get("dryRun") == "All":
                return self.pod_dry_run(parts[3])
        return self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))

    def jobs(self, method, ns, name, query):
        if name is None and method == "GET":
            return self.collection("jobs", ns, query)
        if name is None and method == "POST":
            job = self.read_body()
            with LOCK:
                gone = missing_namespace(ns)
            if gone:
                return self.send_json(404, gone)
            with LOCK:
                bad, STATE["reject_next"] = STATE["reject_next"], None
            if bad:
                return self.send_json(bad["code"], bad)
            bad = validate("jobs", "Job.batch.volcano.sh", job)
            if bad:
                return self.send_json(422, bad)
            denied = volcano_webhook(job)
            if denied:
                return self.send_json(400, webhook_denial(denied))
            name = job.get("metadata", {}).get("name", "")
            with LOCK:
                if (ns, name) in STATE["jobs"]:
                    return self.send_json(409, status(409, "AlreadyExists",
                                                      'jobs.batch.volcano.sh "%s" already exists' % name,
                                                      {"name": name, "group": "batch.volcano.sh", "kind": "jobs"}))
                meta = job.setdefault("metadata", {})
                meta.update({"namespace": ns, "uid": str(uuid.uuid4()), "generation": 1,
                             "creationTimestamp": now_rfc3339()})
                if query.get("dryRun") == "All":
                    meta["resourceVersion"] = str(STATE["rv"])
                    return self.send_json(201, job)
                STATE["jobs"][(ns, name)] = job
                emit("jobs", ns, "ADDED", job)
                return self.send_json(201, job)
        with LOCK:
            job = STATE["jobs"].get((ns, name))
            if job is None:
                return self.send_json(404, status(404, "NotFound", 'jobs.batch.volcano.sh "%s" not found' % name))
            if method == "GET":
                return self.send_json(200, job)
            if method == "PATCH":
                return self.patch_job(ns, name, job)
            if method == "DELETE":
                delete_job(ns, name)
                return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
        return self.send_json(405, status(405, "MethodNotAllowed", method))

    def patch_job(self, ns, name, job):
        """JSON Patch (replace and test ops), under LOCK."""
        if self.headers.get("Content-Type") != "application/json-patch+json":
            return self.send_json(415, status(415, "UnsupportedMediaType",
                                              "the fake only takes application/json-patch+json"))
        ops = self.read_body()
        updated = copy.deepcopy(job)
        for op in ops:
            path = [p.replace("~1", "/").replace("~0", "~") for p in op.get("path", "").strip("/").split("/")]
            parent = updated
            try:
                for p in path[:-1]:
                    parent = parent[int(p)] if isinstance(parent, list) else parent[p]
                last = int(path[-1]) if isinstance(parent, list) else path[-1]
                if op.get("op") == "test":
                    if parent[last] != op.get("value"):
                        return self.send_json(422, status(422, "Invalid", "the server rejected our request due to "
                                                          "an error in our request: testing value %s failed"
                                                          % op.get("path")))
                elif op.get("op") == "replace":
                    parent[last] = op.get("value")
                else:
                    return self.send_json(422, status(422, "Invalid", "unsupported op " + str(op.get("op"))))
            except (KeyError, IndexError, ValueError, TypeError):
                return self.send_json(422, status(422, "Invalid", "the server rejected our request due to an "
                                                  "error in our request: path %s not found" % op.get("path")))
        bad = validate("jobs", "Job.batch.volcano.sh", updated)
        if bad:
            return self.send_json(422, bad)
        denied = volcano_webhook(updated, job)
        if denied:
            return self.send_json(400, webhook_denial(denied))
        updated["metadata"]["generation"] = job["metadata"].get("generation", 1) + 1
        STATE["jobs"][(ns, name)] = updated
        emit("jobs", ns, "MODIFIED", updated)
        sync_pods(ns, updated)
        # The watches may well deliver what the update did before its answer arrives.
        end = time.time() + STATE["patch_answer_delay"]
        while time.time() < end:
            LOCK.wait(end - time.time())  # releases LOCK meanwhile, so the watches send
        return self.send_json(200, updated)

    def forbidden(self, resource, verb, ns=""):
        where = (' in the namespace "%s"' % ns) if ns else " at the cluster scope"
        group = "scheduling.volcano.sh" if resource == "queues" else ""
        return self.send_json(403, status(403, "Forbidden", '%s is forbidden: User "torchx" cannot %s resource "%s" '
                                          'in API group "%s"%s' % (resource, verb, resource, group, where)))

    def queue(self, name):
        if "queues" in STATE["forbidden"]:
            return self.forbidden("queues", "get")
        with LOCK:
            state = STATE["queues"].get(name)
        if state is None:
            return self.send_json(404, status(404, "NotFound", 'queues.scheduling.volcano.sh "%s" not found' % name))
        return self.send_json(200, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                    "metadata": {"name": name}, "spec": {"weight": 1}, "status": {"state": state}})

    def service_account(self, ns, name):
        if "serviceaccounts" in STATE["forbidden"]:
            return self.forbidden("serviceaccounts", "get", ns)
        with LOCK:
            known = name == "default" or (ns, name) in STATE["service_accounts"]
        if not known:
            return self.send_json(404, status(404, "NotFound", 'serviceaccounts "%s" not found' % name))
        return self.send_json(200, {"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": name, "namespace": ns}})

    def pod_dry_run(self, ns):
        pod = self.read_body()
        name = pod.get("metadata", {}).get("name", "")
        if "pods" in STATE["forbidden"]:
            return self.forbidden("pods", "create", ns)
        with LOCK:
            gone = missing_namespace(ns)
            verdict, STATE["reject_next_pod"] = STATE["reject_next_pod"], None
        if gone:
            return self.send_json(404, gone)
        if verdict:
            return self.send_json(verdict["code"], verdict)
        causes = pod_causes(pod)
        if causes:
            msg = 'Pod "%s" is invalid: %s' % (name, ", ".join(c["field"] + ": " + c["message"] for c in causes))
            return self.send_json(422, status(422, "Invalid", msg, {"name": name, "kind": "Pod", "causes": causes}))
        return self.send_json(201, pod)

    def commands(self, method, ns):
        cmd = self.read_body()
        with LOCK:
            gone = missing_namespace(ns)
        if gone:
            return self.send_json(404, gone)
        bad = validate("commands", "Command.bus.volcano.sh", cmd)
        if bad:
            return self.send_json(422, bad)
        meta = cmd.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = meta.get("generateName", "cmd-") + uuid.uuid4().hex[:5]
        meta.update({"namespace": ns, "uid": str(uuid.uuid4())})
        with LOCK:
            STATE["commands"].append(cmd)
            target = cmd.get("target", {})
            job = STATE["jobs"].get((ns, target.get("name")))
            if job is not None and cmd.get("action") == "AbortJob":
                if job["metadata"]["uid"] != target.get("uid"):
                    return self.send_json(422, status(422, "Invalid", "target uid does not match the Job"))
                set_job_phase(ns, target["name"], "Aborting")
                # Volcano's soft retain: running pods are deleted, finished ones kept.
                for key in [k for k, p in STATE["pods"].items()
                            if k[0] == ns and p["metadata"]["labels"].get("volcano.sh/job-name") == target["name"]
                            and p["status"]["phase"] in ("Pending", "Running")]:
                    emit("pods", ns, "DELETED", STATE["pods"].pop(key))
                set_job_phase(ns, target["name"], "Aborted")
        return self.send_json(201, cmd)

    def collection(self, kind, ns, query):
        selector = query.get("labelSelector", "")
        if query.get("watch") not in ("1", "true"):
            with LOCK:
                items = [o for (n, _), o in STATE[kind].items() if n == ns and matches(o, selector)]
                rv = str(STATE["rv"])
            return self.send_json(200, {"kind": "List", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": rv}, "items": items})
        since = int(query.get("resourceVersion") or 0)
        with LOCK:
            if since < STATE["min_watch_rv"] or (since == 0 and STATE["min_watch_rv"] > 0):
                return self.send_json(410, status(410, "Expired", "too old resource version: %d (%d)"
                                                  % (since, STATE["min_watch_rv"])))
            expire_gen, drop_gen = STATE["expire_event"], STATE["drop_watch"]
            STATE["watch_starts"] += 1
        deadline = time.time() + float(query.get("timeoutSeconds") or 300)
        self.start_stream()
        if STATE["watch_end_at_once"]:
            return self.end_stream()
        sent = since
        while True:
            with LOCK:
                batch = [(rv, t, o) for rv, k, n, t, o in STATE["events"]
                         if rv > sent and k == kind and n == ns and matches(o, selector)]
                if batch:
                    sent = batch[-1][0]
                elif STATE["expire_event"] != expire_gen:
                    self.chunk({"type": "ERROR", "object": status(410, "Expired", "too old resource version")})
                    return self.end_stream()
                elif STATE["drop_watch"] != drop_gen or time.time() < STATE["outage_until"]:
                    self.close_connection = True
                    return None  # an abrupt drop: no final chunk
                elif time.time() >= deadline:
                    return self.end_stream()
                else:
                    LOCK.wait(0.2)
                    continue
            for rv, t, o in batch:
                self.chunk({"type": t, "object": o})

    def pod_log(self, ns, name, query):
        with LOCK:
            pod = STATE["pods"].get((ns, name))
            if pod is None:
                return self.send_json(404, status(404, "NotFound", 'pods "%s" not found' % name))
            fail = STATE["log_fail"].get((ns, name))
            if fail:
                return self.send_json(fail["code"], fail)
            names = [c["name"] for c in pod["spec"]["containers"]]
            container = query.get("container")
            if container is None and len(names) > 1:
                return self.send_json(400, status(400, "BadRequest", "a container name must be specified for pod %s, "
                                                  "choose one of: [%s]" % (name, " ".join(names))))
            if container is not None and container not in names:
                return self.send_json(400, status(400, "BadRequest",
                                                  "container %s is not valid for pod %s" % (container, name)))
            container = container or names[0]
            if pod["status"].get("phase") == "Pending":
                return self.send_json(400, status(400, "BadRequest", 'container "%s" in pod "%s" is waiting to start: '
                                                  'ContainerCreating' % (container, name)))
            uid = pod["metadata"]["uid"]
            if container != main_container(pod):
                uid += "/" + container  # a sidecar's own (empty) log
            drop_gen = STATE["drop_logs"]
        since_ns = 0
        if query.get("sinceTime"):
            t = datetime.datetime.strptime(query["sinceTime"][:19], "%Y-%m-%dT%H:%M:%S")
            since_ns = int(t.replace(tzinfo=datetime.timezone.utc).timestamp()) * 10**9
        stamps = query.get("timestamps") == "true"
        follow = query.get("follow") == "true"
        if follow:
            time.sleep(max(0.0, STATE["hold_follow_until"] - time.time()))
        self.start_stream()
        sent = 0
        while True:
            with LOCK:
                lines = STATE["logs"].get((ns, name, uid), [])[sent:]
                sent += len(lines)
                current = STATE["pods"].get((ns, name))
                finished = (current is None or current["metadata"]["uid"] != uid
                            or current["status"]["phase"] in ("Succeeded", "Failed"))
                dropped = STATE["drop_logs"] != drop_gen
                if not lines and follow and not finished and not dropped:
                    LOCK.wait(0.2)
                    continue
            out = "".join(("%s %s\n" % (stamp, text)) if stamps else text + "\n"
                          for t_ns, stamp, text in lines if t_ns >= since_ns)
            if out:
                self.raw_chunk(out.encode())
            if dropped:
                self.close_connection = True
                return None
            if not follow or (finished and not lines):
                return self.end_stream()

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, event):
        self.raw_chunk((json.dumps(event) + "\n").encode())

    def raw_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")

    def control(self, method, parts):
        body = self.read_body() if method == "POST" else {}
        with LOCK:
            if parts == ["state"]:
                return self.send_json(200, {
                    "jobs": [o for o in STATE["jobs"].values()], "pods": [o for o in STATE["pods"].values()],
                    "commands": STATE["commands"], "requests": STATE["requests"], "pruned": STATE["pruned"],
                    "watch_starts": STATE["watch_starts"]})
            if parts[0] == "jobs" and len(parts) == 2:
                job = body
                meta = job.setdefault("metadata", {})
                meta.update({"namespace": parts[1], "uid": str(uuid.uuid4()), "generation": 1,
                             "creationTimestamp": now_rfc3339()})
                STATE["jobs"][(parts[1], meta["name"])] = job
                emit("jobs", parts[1], "ADDED", job)
                return self.send_json(201, job)
            if parts[0] == "jobs" and len(parts) == 4 and parts[3] == "delete":
                delete_job(parts[1], parts[2])
                return self.send_json(200, {})
            if parts[0] == "jobs" and len(parts) == 4 and parts[3] == "sidecar":
                STATE["sidecars"][(parts[1], parts[2])] = body["name"]
                return self.send_json(200, {})
            if parts == ["gc-delay"]:
                STATE["gc_delay"] = float(body["seconds"])
                return self.send_json(200, {})
            if parts[0] == "namespaces" and len(parts) == 2:
                STATE["namespaces"].add(parts[1])
                return self.send_json(200, {})
            if parts[0] == "jobs" and parts[3] == "vanish":
                STATE["jobs"].pop((parts[1], parts[2]), None)
                return self.send_json(200, {})
            if parts[0] == "jobs" and parts[3] == "phase":
                if (parts[1], parts[2]) not in STATE["jobs"]:
                    return self.send_json(404, {"error": "no such job"})
                if body.get("pods") == "Pending":
                    STATE["pending_pods"].add((parts[1], parts[2]))
                set_job_phase(parts[1], parts[2], body["phase"])
                return self.send_json(200, {})
            if parts[0] == "pods":
                key = (parts[1], parts[2])
                pod = STATE["pods"].get(key)
                if pod is None:
                    return self.send_json(404, {"error": "no such pod"})
                if parts[3] == "log":
                    store = STATE["logs"].setdefault((key[0], key[1], pod["metadata"]["uid"]), [])
                    for text in body["lines"]:
                        t_ns = time.time_ns()
                        if store and t_ns <= store[-1][0]:
                            t_ns = store[-1][0] + 1
                        stamp = datetime.datetime.fromtimestamp(t_ns // 10**9, datetime.timezone.utc)
                        store.append((t_ns, stamp.strftime("%Y-%m-%dT%H:%M:%S.") + "%09dZ" % (t_ns % 10**9), text))
                    LOCK.notify_all()
                    return self.send_json(200, {})
                if parts[3] == "phase":
                    set_pod_phase(key, body["phase"], body.get("exitCode", 0))
                    return self.send_json(200, {})
                if parts[3] == "delete":
                    emit("pods", key[0], "DELETED", STATE["pods"].pop(key))
                    return self.send_json(200, {})
                if parts[3] == "status":
                    node = body.pop("nodeName", None)  # the scheduler's binding, in the pod's spec
                    if node:
                        pod["spec"]["nodeName"] = node
                    pod["status"].update(body)
                    emit("pods", key[0], "MODIFIED", pod)
                    return self.send_json(200, {})
                if parts[3] == "log-fail":
                    code = int(body.get("code", 0))
                    if code:
                        STATE["log_fail"][key] = status(code, body.get("reason", "InternalError"),
                                                        body.get("message", "the kubelet did not answer"))
                    else:
                        STATE["log_fail"].pop(key, None)
                    return self.send_json(200, {})
                if parts[3] == "restart":
                    job_name = pod["metadata"]["labels"]["volcano.sh/job-name"]
                    job = STATE["jobs"][(key[0], job_name)]
                    task = next(t for t in job["spec"]["tasks"] if t["name"] == pod["metadata"]["labels"]["volcano.sh/task-spec"])
                    emit("pods", key[0], "DELETED", STATE["pods"].pop(key))
                    job.setdefault("status", {})["retryCount"] = job.get("status", {}).get("retryCount", 0) + 1
                    set_job_phase(key[0], job_name, "Restarting")
                    new_pod(key[0], job, task, 0)
                    set_job_phase(key[0], job_name, "Running")
                    return self.send_json(200, {})
            if parts == ["watches", "expire"]:
                if body.get("how") == "http":
                    # As after a compaction: every version handed out so far is too old to watch
                    # from; a fresh list gets a newer one.
                    STATE["rv"] += 1
                    STATE["min_watch_rv"] = STATE["rv"]
                    STATE["drop_watch"] += 1
                else:
                    STATE["expire_event"] += 1
                LOCK.notify_all()
                return self.send_json(200, {})
            if parts == ["watches", "end-at-once"]:
                STATE["watch_end_at_once"] = bool(body.get("on"))
                return self.send_json(200, {})
            if parts == ["logs", "hold-follows"]:
                STATE["hold_follow_until"] = time.time() + float(body["seconds"])
                return self.send_json(200, {})
            if parts == ["patch-answer-delay"]:
                STATE["patch_answer_delay"] = float(body["seconds"])
                return self.send_json(200, {})
            if parts == ["outage"]:
                STATE["outage_until"] = time.time() + float(body["seconds"])
                LOCK.notify_all()
                return self.send_json(200, {})
            if parts[0] == "queues" and len(parts) == 2:
                STATE["queues"][parts[1]] = body.get("state", "Open")
                return self.send_json(200, {})
            if parts[0] == "serviceaccounts" and len(parts) == 3:
                STATE["service_accounts"].add((parts[1], parts[2]))
                return self.send_json(200, {})
            if parts == ["reject-next-pod"]:
                STATE["reject_next_pod"] = status(body["code"], body.get("reason", "Invalid"), body["message"])
                return self.send_json(200, {})
            if parts == ["forbid"]:
                STATE["forbidden"].add(body["resource"])
                return self.send_json(200, {})
            if parts == ["reject-next"]:
                STATE["reject_next"] = status(body["code"], body["reason"], body["message"],
                                              {"causes": [{"reason": "FieldValueInvalid", "field": body["field"],
                                                           "message": body["message"]}]})
                return self.send_json(200, {})
            if parts == ["watches", "drop"]:
                STATE["drop_watch"] += 1
                LOCK.notify_all()
                return self.send_json(200, {})
            if parts == ["logs", "drop"]:
                STATE["drop_logs"] += 1
                LOCK.notify_all()
                return self.send_json(200, {})
        return self.send_json(404, {"error": "unknown control " + "/".join(parts)})

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PATCH(self):
        self.route("PATCH")


def main():
    global TOKEN, WEBHOOK
    parser = argparse.ArgumentParser()
    parser.add_argument("--schemas")
    parser.add_argument("--token")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--no-webhook", action="store_true")
    args = parser.parse_args()
    TOKEN = args.token
    WEBHOOK = not args.no_webhook
    if args.schemas:
        load_validators(args.schemas)
    class Server(http.server.ThreadingHTTPServer):
        # A real apiserver's backlog (Go's listen uses somaxconn): with
        # socketserver's 5, a burst of connections overflows the accept queue
        # and some hang half-open.
        request_queue_size = 1024
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
