"""A real Ray head for the cluster tests, in a process of its own on this machine (two CPUs, one custom device
resource per "worker"), that drivers connect to by address and that a test can outlive: `ray_head()` yields
(address, env for a driver) and on exit stops the head and checks that nothing of its session is left running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAD = """
import json, sys, ray
ray.init(num_cpus={cpus}, resources={resources}, include_dashboard=False, log_to_driver=False)
node = ray._private.worker._global_node
print(json.dumps({{"address": node.address, "session": node.session_name}}), flush=True)
sys.stdin.read()  # until the test closes it
ray.shutdown()
"""


def driver_env() -> dict[str, str]:
    """The environment a driver (or the head) runs in: this checkout's code first. Token authentication off (as a
    driver in this process imported Ray without a token): the head listens on this machine alone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["RAY_AUTH_MODE"] = "disabled"
    return env


def running(session: str) -> list[int]:
    """Processes of this Ray session still alive (its raylet, GCS, workers: their command lines name it)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if session.encode() in (proc / "cmdline").read_bytes():
                    out.append(int(proc.name))
    return out


@contextlib.contextmanager
def ray_head(devices: int = 2, cpus: int = 2) -> Iterator[tuple[str, dict[str, str]]]:
    env = driver_env()
    resources = {f"infertune_device_{i}": 1 for i in range(devices)}
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD.format(cpus=cpus, resources=resources)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
        start_new_session=True,
    )
    import json

    assert head.stdout is not None and head.stdin is not None
    info = json.loads(head.stdout.readline())
    try:
        yield info["address"], env
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)  # our own head's group, nothing else
            head.wait()
        deadline = time.monotonic() + 30
        while running(info["session"]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert running(info["session"]) == [], "the Ray session left processes running"


def timed_fake(config, workload, model_path, delay_s=0.0, **kw):
    """The fake backend's fixed timings (tests/tuning/test_candidate_flow.py: bfloat16 fastest), lasting `delay_s`
    and saying when the trial began and ended; importable by the head's workers (a test module may not be)."""
    from tests.tuning.test_candidate_flow import _fake_trial

    began = time.time()
    time.sleep(delay_s)
    r = _fake_trial(config, workload, model_path, **kw)
    r.environment = {"began": began, "ended": time.time()}
    return r


def slow_once(config, workload, model_path, marker: str = "", **kw):
    """The first attempt writes `marker` and runs long (its node is removed meanwhile); the retry returns."""
    from infertune.measure.results import TrialResult

    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(120)
    return TrialResult(status="ok", config=config, workload=workload, model_path=str(model_path))
