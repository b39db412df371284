"""The TorchX scheduler plugin (python/) against a private torchxd, through
the real TorchX (../shared/peers: TorchX HEAD finds it through the
torchx_plugins namespace package, 0.7.0 through the torchx.schedulers entry
point of an installed distribution). Covers get_runner() from scripts that
exit while the job runs on and a second one that attaches, TorchX's own CLI,
and a daemon error surfacing as a Python exception.

    plugin_test.py BIN_DIR SOURCE_DIR PEER   (PEER: torchx-head or torchx-0.7.0)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

BIN, SOURCE, PEER = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
PEERS = os.path.join(SOURCE, "..", "shared", "peers")
TORCHX = os.path.join(PEERS, PEER)
PYTHON = "/usr/bin/python3"


def skip_reason():
    if not os.path.isdir(TORCHX):
        return f"{TORCHX} is absent (the pinned TorchX trees beside the project)"
    probe = subprocess.run([PYTHON, "-c", "import torchx.runner, torchx.cli.main"], env=dict(os.environ, PYTHONPATH=TORCHX),
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return "TorchX does not import here (" + probe.stderr.strip().splitlines()[-1] + "); apt-get install " \
               "python3-yaml python3-fsspec python3-filelock python3-tabulate python3-typing-inspect"
    return None


class PluginTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="torchxd-plugin-")
        cls.socket = os.path.join(cls.dir, "torchxd.sock")
        with open(os.path.join(cls.dir, "daemon.log"), "w") as log:
            cls.daemon = subprocess.Popen([os.path.join(BIN, "torchxd"), "--socket", cls.socket, "--state-dir",
                                           os.path.join(cls.dir, "state"), "--grace-period", "0.5"],
                                          stdout=subprocess.DEVNULL, stderr=log)
        for _ in range(200):
            if os.path.exists(cls.socket):
                break
            time.sleep(0.05)
        path = [os.path.join(SOURCE, "python"), TORCHX]
        if PEER == "torchx-0.7.0":
            # TorchX 0.7 reads schedulers from installed distributions' entry points: the .deb's dist-info.
            subprocess.run([PYTHON, os.path.join(SOURCE, "packaging", "python_dist_info.py"),
                            os.path.join(SOURCE, "python", "pyproject.toml"), os.path.join(cls.dir, "site")], check=True)
            path.insert(0, os.path.join(cls.dir, "site"))
        # Replicas' `python` is Debian's, which has TorchX's dependencies (not the first one on PATH).
        pybin = os.path.join(cls.dir, "pybin")
        os.makedirs(pybin)
        os.symlink(PYTHON, os.path.join(pybin, "python"))
        cls.env = dict(os.environ, PYTHONPATH=":".join(path), TORCHXD_SOCKET=cls.socket, TORCHX_NO_AUTOSTART="1",
                       PATH=pybin + ":" + BIN + ":" + os.environ.get("PATH", ""))
        cls.work = os.path.join(cls.dir, "work")
        os.makedirs(cls.work)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.terminate()
        cls.daemon.wait(timeout=20)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def py(self, script, timeout=60):
        done = subprocess.run([PYTHON, "-c", textwrap.dedent(script)], env=self.env, cwd=self.work,
                              capture_output=True, text=True, timeout=timeout)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def torchx(self, *args, check=True):
        done = subprocess.run([PYTHON, "-m", "torchx.cli.main", *args], env=self.env, cwd=self.work,
                              capture_output=True, text=True, timeout=60)
        if check:
            self.assertEqual(done.returncode, 0, done.stderr)
        return done

    def test_the_schedulers_are_registered_beside_torchxs_own(self):
        names = self.py("from torchx.schedulers import get_scheduler_factories as f; print(sorted(f()))")
        for name in ("torchxd", "torchxd_docker", "torchxd_kubernetes", "torchxd_slurm", "local_cwd", "kubernetes", "slurm"):
            self.assertIn(f"'{name}'", names)

    def test_a_job_outlives_the_script_that_ran_it_and_another_attaches(self):
        # The job ends once the second script has seen it run (a fixed sleep was over before a
        # loaded machine had started that script's Python and imported TorchX).
        release = os.path.join(self.work, "release")
        handle = self.py(f"""
            from torchx.runner import get_runner
            from torchx.components.utils import sh
            app = sh("sh", "-c", "for i in $(seq 1200); do [ -e {release} ] && break; sleep 0.1; done; echo outlived the notebook")
            print(get_runner().run(app, scheduler="torchxd"))
        """).strip()
        self.assertTrue(handle.startswith("torchxd://torchx/sh-"), handle)
        out = self.py(f"""
            from torchx.runner import get_runner
            r = get_runner()
            print(r.status("{handle}").state.name)
            open("{release}", "w").close()
            print(r.wait("{handle}", wait_interval=0.1).state.name)
            print("".join(r.log_lines("{handle}", "sh", 0)), end="")
            print([a.app_handle for a in r.list("torchxd")])
            print(r.describe("{handle}").roles[0].entrypoint)
        """)
        lines = out.splitlines()
        self.assertIn(lines[0], ("RUNNING", "PENDING", "SUBMITTED"))  # it runs on without its script
        self.assertEqual(lines[1], "SUCCEEDED")
        self.assertEqual(lines[2], "outlived the notebook")
        self.assertIn(handle, lines[3])
        self.assertEqual(lines[4], "sh")
        # The daemon's own CLI sees it as a local_cwd app.
        listed = subprocess.run([os.path.join(BIN, "torchx"), "--socket", self.socket, "list"], capture_output=True,
                                text=True, env=self.env)
        self.assertIn("local_cwd://torchx/" + handle.rsplit("/", 1)[1], listed.stdout)

    def test_torchxs_own_cli_runs_follows_and_cancels_through_the_daemon(self):
        run = self.torchx("run", "-s", "torchxd", "utils.echo", "--msg", "from torchx's cli")
        handle = next(l for l in run.stdout.splitlines() if l.startswith("torchxd://"))
        for _ in range(100):
            if "SUCCEEDED" in self.torchx("status", handle).stdout:
                break
            time.sleep(0.1)
        self.assertIn("State: SUCCEEDED", self.torchx("status", handle).stdout)
        self.assertIn("echo/0 from torchx's cli", self.torchx("log", handle).stdout)
        self.assertIn(handle, self.torchx("list", "-s", "torchxd").stdout)
        long = self.torchx("run", "-s", "torchxd", "utils.sh", "sleep", "60")
        running = next(l for l in long.stdout.splitlines() if l.startswith("torchxd://"))
        self.torchx("cancel", running)
        for _ in range(100):
            if "CANCELLED" in self.torchx("status", running).stdout:
                break
            time.sleep(0.1)
        self.assertIn("State: CANCELLED", self.torchx("status", running).stdout)

    def test_a_tracker_records_the_run_under_torchxs_handle(self):
        # TorchX's fsspec tracker, configured as TorchX documents it; the replica records through it.
        site = os.path.join(self.dir, "tracker-site")
        dist = os.path.join(site, "mytracker-0.1.dist-info")
        os.makedirs(dist, exist_ok=True)
        with open(os.path.join(dist, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: mytracker\nVersion: 0.1\n")
        with open(os.path.join(dist, "entry_points.txt"), "w") as f:
            f.write("[torchx.tracker]\nmy_fsspec = torchx.tracker.backend.fsspec:create\n")
        runs = os.path.join(self.dir, "runs")
        os.makedirs(runs)
        with open(os.path.join(self.dir, "fsspec.cfg"), "w") as f:
            f.write(f"protocol=file\nroot_path={runs}\n")
        work = os.path.join(self.dir, "tracked")
        os.makedirs(work)
        with open(os.path.join(work, ".torchxconfig"), "w") as f:
            f.write(f"[torchx:tracker]\nmy_fsspec =\n\n[tracker:my_fsspec]\nconfig = {self.dir}/fsspec.cfg\n")
        env = dict(self.env, PYTHONPATH=site + ":" + self.env["PYTHONPATH"])
        script = textwrap.dedent('''
            from torchx.runner import get_runner
            from torchx.components.utils import python
            app = python(c="from torchx.tracker import app_run_from_env; app_run_from_env().add_metadata(answer=42)")
            r = get_runner()
            h = r.run(app, scheduler="torchxd")
            print(h)
            print(r.wait(h, wait_interval=0.1).state.name)
            from torchx.tracker.backend.fsspec import create
            print(create("%s/fsspec.cfg").metadata(h))
        ''' % self.dir)
        done = subprocess.run([PYTHON, "-c", script], env=env, cwd=work, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        handle, state, metadata = done.stdout.splitlines()[-3:]
        self.assertEqual(state, "SUCCEEDED", done.stderr)
        self.assertIn("'answer': 42", metadata)

    @unittest.skipUnless(os.path.isdir(os.path.join(TORCHX, "scripts")), "the peer has no integration test scripts")
    def test_torchxs_component_integration_tests_pass_as_on_its_own_local_cwd(self):
        # TorchX's own suite (integ_tests.IntegComponentTest over component_provider), run from
        # a checkout-like directory (its copy test reads README.md there) against torchxd and
        # against TorchX's local_cwd in the same environment: torchxd passes every one TorchX does.
        work = os.path.join(self.dir, "checkout")
        os.makedirs(work)
        with open(os.path.join(work, "README.md"), "w") as f:
            f.write("a checkout\n")
        # One process per scheduler, both at once (each mostly waits on TorchX's polling).
        script = textwrap.dedent('''
            import contextlib, io, json, os, re, sys
            import torchx.components.integration_tests.component_provider as cp
            from torchx.components.integration_tests.integ_tests import IntegComponentTest
            sched = sys.argv[1]
            if sched == "local_cwd":
                # TorchX's own local_cwd binds its DDP job's rendezvous port as declared (29500),
                # while torchxd's job of the same component starts: where torchxd's probe came
                # before TorchX's torchrun bound it, both jobs met in one store and hung. TorchX's
                # gets a port torchxd never hands out for 29500 (those are 29500-30499).
                import functools
                import torchx.components.dist as dist
                dist.ddp = functools.partial(dist.ddp, rdzv_port=int(sys.argv[2]))
            states = {}
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    IntegComponentTest().run_components(module=cp, scheduler=sched, image=os.getcwd(), cfg={})
                except AssertionError:
                    pass
            for handle, state in re.findall(r"=== BEGIN LOG (\\S+) \\((\\w+)\\)===", out.getvalue()):
                states[handle.rsplit("/", 1)[1].rsplit("-", 1)[0]] = state
            print(json.dumps(states))
        ''')
        env = dict(self.env, PYTHONPATH=self.env["PYTHONPATH"] + ":" + os.path.join(TORCHX, "scripts"))
        # Each its own TMPDIR: local_cwd's cases write fixed names in tempfile.gettempdir().
        import socket
        with socket.socket() as probe:
            probe.bind(("", 0))
            local_cwd_port = str(probe.getsockname()[1])  # an ephemeral port: above 30499
        runs = {}
        for sched in ["torchxd", "local_cwd"]:
            tmp = os.path.join(self.dir, "tmp-" + sched)
            os.makedirs(tmp)
            runs[sched] = subprocess.Popen([PYTHON, "-c", script, sched, local_cwd_port], env=dict(env, TMPDIR=tmp), cwd=work,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        import json
        states = {}
        for sched, run in runs.items():
            out, err = run.communicate(timeout=280)
            self.assertEqual(run.returncode, 0, f"{sched}: {err[-3000:]}")
            for name, state in json.loads(out.strip().splitlines()[-1]).items():
                states.setdefault(name, {})[sched] = state
        print(f"\nTorchX's component integration tests: {states}")
        self.assertGreaterEqual(len(states), 5, states)
        for name, by in states.items():
            if by.get("local_cwd") == "SUCCEEDED":
                self.assertEqual(by.get("torchxd"), "SUCCEEDED", f"{name}: {by}")

    def test_a_user_daemon_is_started_when_none_answers(self):
        # As the torchx CLI: no TORCHXD_SOCKET, nothing on the user socket: torchxd from PATH is started.
        runtime = os.path.join(self.dir, "runtime")
        os.makedirs(runtime, mode=0o700)
        env = {k: v for k, v in self.env.items() if k not in ("TORCHXD_SOCKET", "TORCHX_NO_AUTOSTART")}
        env.update(XDG_RUNTIME_DIR=runtime, XDG_STATE_HOME=os.path.join(self.dir, "xdg-state"))
        script = textwrap.dedent('''
            from torchx.runner import get_runner
            from torchx.components.utils import echo
            r = get_runner()
            h = r.run(echo(msg="autostarted"), scheduler="torchxd")
            r.wait(h, wait_interval=0.1)
            print("".join(r.log_lines(h, "echo", 0)), end="")
        ''')
        try:
            done = subprocess.run([PYTHON, "-c", script], env=env, cwd=self.work, capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout, "autostarted\n")
            self.assertTrue(os.path.exists(os.path.join(runtime, "torchxd", "torchxd.sock")))
        finally:
            subprocess.run([os.path.join(BIN, "torchx"), "daemon", "stop"], env=dict(env, TORCHX_NO_AUTOSTART="1"),
                           capture_output=True, timeout=30)

    def test_run_options_are_the_daemons_and_its_errors_are_python_exceptions(self):
        out = self.py("""
            from torchx.runner import get_runner
            opts = get_runner().scheduler_run_opts("torchxd")
            print(sorted(o for o, _ in opts))
        """)
        for key in ("log_dir", "queue", "max_duration", "restart_backoff"):
            self.assertIn(f"'{key}'", out)
        out = self.py("""
            from torchx.runner import get_runner
            from torchx.components.utils import echo
            from torchxd import DaemonError
            try:
                get_runner().run(echo(), scheduler="torchxd", cfg={"queue": "nosuch"})
            except DaemonError as e:
                print(e.code, "|", e)
        """)
        self.assertIn("InvalidArgument | torchxd: queue `nosuch` does not exist on this box", out)


if __name__ == "__main__":
    why = skip_reason()
    if why:
        print(f"python plugin tests skipped: {why}")
        sys.exit(0)
    unittest.main(argv=[sys.argv[0], "-v"])
