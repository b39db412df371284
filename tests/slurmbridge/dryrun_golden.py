#!/usr/bin/python3
"""`torchx run -s slurm --dryrun` of torchxd against the real TorchX's (HEAD, from
../shared/peers) for TorchX's builtin components: the sbatch command and script
must be TorchX's. Normalized only where TorchX's output is not reproducible: the
session id (a fresh UUID per run) and the order of the --export list (a Python
dict's insertion order; torchxd keeps a role's env sorted).

usage: dryrun_golden.py TORCHX_BIN SOURCE_DIR
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

CASES = [
    ["utils.echo", "--msg", "hi-slurm"],
    ["utils.echo", "--msg", "it's ${app_id} $HOME", "--num_replicas", "3"],
    ["utils.touch", "--file", "/tmp/a b"],
    ["utils.sh", "echo", "a", "&&", "echo", "b"],
    ["utils.copy", "--src", "/tmp/x", "--dst", "/tmp/y"],
    ["utils.booth", "--x1", "1", "--x2", "2"],
    ["utils.python", "-c", "print(1)"],
    ["utils.binary", "--entrypoint", "/bin/true"],
    ["dist.ddp", "-j", "2x2", "--script", "train.py", "--rdzv_port", "29600"],
    ["dist.ddp", "-j", "1x1", "--gpu", "2", "--cpu", "8", "--memMB", "4096", "-m", "pkg.main"],
    ["dist.spmd", "-j", "2x1", "--script", "train.py"],
]
CFGS = ["", "partition=gpu,time=10,comment=hello world,account=acct,qos=hi,constraint=c,mail-user=u@x,mail-type=END"]


def skip(why):
    print(f"slurm dryrun golden skipped: {why}")
    sys.exit(0)


def request(text):
    mark = "=== SCHEDULER REQUEST ===\n"
    if mark not in text:
        return None
    return text.split(mark, 1)[1]


def normalize(req):
    req = re.sub(r"TORCHX_INTERNAL_SESSION_ID=[0-9a-f-]+", "TORCHX_INTERNAL_SESSION_ID=<sid>", req)
    start = req.index("\nsrun ") + 1
    end = req.index("\nexitcode=$?", start)
    tokens = []
    for tok in shlex.split(req[start:end].replace("\\\n", " ")):
        if tok.startswith("--export=ALL,"):
            tok = "--export=ALL," + ",".join(sorted(tok[len("--export=ALL,"):].split(",")))
        tokens.append(tok)
    return req[:start], tokens, req[end:]


def main():
    torchx_bin, source = sys.argv[1], sys.argv[2]
    peer = os.path.join(source, "..", "shared", "peers", "torchx-head")
    if not os.path.isdir(peer):
        skip(f"{peer} is absent")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TORCHX"))}
    env["PYTHONPATH"] = peer
    env["PATH"] = "/usr/bin:/bin"  # the same sinfo (or none) for both
    probe = subprocess.run(["/usr/bin/python3", "-c", "import torchx.schedulers.slurm_scheduler"], env=env,
                           capture_output=True, text=True)
    if probe.returncode != 0:
        skip("TorchX does not import here: " + probe.stderr.strip().splitlines()[-1])
    failures = 0
    with tempfile.TemporaryDirectory() as cwd:
        for cfg in CFGS:
            for case in CASES:
                cfg_args = ["-cfg", cfg] if cfg else []
                args = ["run", "--dryrun", "-s", "slurm", *cfg_args, *case]
                theirs = subprocess.run(["/usr/bin/python3", "-m", "torchx.cli.main", *args], cwd=cwd, env=env,
                                        capture_output=True, text=True)
                ours = subprocess.run([torchx_bin, *args], cwd=cwd, env=env, capture_output=True, text=True)
                want, got = request(theirs.stdout), request(ours.stdout)
                label = " ".join(shlex.quote(a) for a in args)
                if want is None:
                    print(f"TorchX gives no dry run for {label} (skipped): {theirs.stderr.strip()[-300:]}")
                    continue
                if got is None:
                    print(f"FAIL {label}: torchxd gives none (exit {ours.returncode}): {ours.stderr.strip()}")
                    failures += 1
                    continue
                if normalize(want) != normalize(got):
                    print(f"FAIL {label}:\n--- TorchX\n{want}\n--- torchxd\n{got}")
                    failures += 1
                else:
                    print(f"ok {label}")
    if failures:
        print(f"{failures} dry runs differ")
        sys.exit(1)


if __name__ == "__main__":
    main()
