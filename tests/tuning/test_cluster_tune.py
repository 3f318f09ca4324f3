"""The real tuning loop through a real Ray head (tests/measure/ray_head.py: two CPUs, a custom device resource
each) on the fixed fake-timing backend: the same verdicts and files as this machine gives, each step's trials on
one device, and a run whose driver is killed mid-step resumed to the same end with nothing left running."""

import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from infertune.api import host_facts
from infertune.core.workload import Workload
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.tuning import loop
from infertune.tuning.run import Run, TuneSpec
from tests.measure.ray_head import ray_head, timed_fake
from tests.tuning.test_candidate_flow import _fake_trial

ray = pytest.importorskip("ray")

from infertune.measure.cluster import RayExecutor  # noqa: E402


def slow_fake(config, workload, model_path, delay_s=0.0, **kw):
    """The fake backend's fixed timings, a trial lasting long enough for a driver to die in the middle of one."""
    time.sleep(delay_s)
    return _fake_trial(config, workload, model_path, **kw)


class Recording(RayExecutor):
    """Where and when each trial ran, grouped by pin (a group: a step's trials, from any thread)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.groups: list[list[tuple[str, str, float, float]]] = []

    def pin(self, lane=None):
        super().pin(lane)
        self.pinned["group"] = len(self.groups)  # a key of ours: the executor reads only device and node
        self.groups.append([])

    def __call__(self, *a, **kw):
        r = super().__call__(*a, **kw)
        where, env = r.environment["placement"], r.environment
        self.groups[self.pinned["group"]].append((where["node"], where["device"], env["began"], env["ended"]))
        return r


def _spec(model, max_trials: int = 3) -> TuneSpec:
    wl = Workload(model=str(model), prompts=["Once upon a time"], max_new_tokens=4, warmup=0)
    start = Setup(dtype="float32", attn="eager")
    return TuneSpec(
        model=str(model), model_path=str(model), workload=wl, start=start, max_trials=max_trials, min_pairs=2
    )


def _lines(run_dir) -> list[dict]:
    """results.jsonl without what may differ between two runs of the same steps: where and how long."""
    out = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        step = json.loads(line)
        step["trial"].pop("environment")
        out.append(step)
    return out


@pytest.fixture()
def head(monkeypatch):
    with ray_head() as (address, env):
        for k in ("RAY_AUTH_MODE", "PYTHONPATH"):
            monkeypatch.setenv(k, env[k])
        yield address, env


def test_a_tune_on_ray_gives_the_local_verdicts_and_files_each_step_on_one_device(head, tiny_model, tmp_path):
    """Two devices: each step on one of them, the next candidate measured ahead on the other, side by side."""
    spec = _spec(tiny_model, max_trials=4)
    facts = host_facts(spec, profile_model(tiny_model))
    local = loop.tune(Run.create(tmp_path / "local", spec), facts, executor=timed_fake)
    ray.init(address=head[0], log_to_driver=False)
    try:
        ex = Recording(trial_fn=functools.partial(timed_fake, delay_s=0.3))
        on_ray = loop.tune(Run.create(tmp_path / "ray", spec), facts, executor=ex)
    finally:
        ray.shutdown()
    assert [(s.technique, s.verdict) for s in on_ray] == [(s.technique, s.verdict) for s in local]
    assert _lines(tmp_path / "ray") == _lines(tmp_path / "local")  # the same files, but for where each trial ran
    groups = [g for g in ex.groups if g]
    assert all(len({(node, dev) for node, dev, *_ in g}) == 1 for g in groups)  # a step's pairs on one device
    assert {g[0][1] for g in groups} == {"infertune_device_0", "infertune_device_1"}  # the steps used both
    spans = sorted((min(t[2] for t in g), max(t[3] for t in g), g[0][1]) for g in groups)
    side_by_side = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert side_by_side and all(a[2] != b[2] for a, b in side_by_side)  # steps ran at once, on different devices
    from infertune import api

    report = api.report(tmp_path / "ray", rebuild=True)
    assert [r["placement"]["device"] for r in report["steps"]] == [
        s.trial.environment["placement"]["device"] for s in on_ray
    ]
    nodes = report["environment"]["nodes"]  # busy per node, where, on what
    (node,) = {g[0][0] for g in groups}
    assert list(nodes) == [node] and nodes[node]["steps"] == len(on_ray) and nodes[node]["busy"] is False
    assert nodes[node]["model"] and "nodes" not in (api.report(tmp_path / "local", rebuild=True)["environment"])


DRIVER = """
import functools
import itertools
import sys
from pathlib import Path
import ray
from infertune.api import host_facts
from infertune.measure.cluster import RayExecutor
from infertune.probe.model import profile_model
from infertune.tuning import loop
from infertune.tuning.run import Run
from tests.tuning.test_cluster_tune import slow_fake

run = Run(Path(sys.argv[2]))
spec = run.spec()
ray.init(address=sys.argv[1], log_to_driver=False)
trial = functools.partial(slow_fake, delay_s=float(sys.argv[3]))
steps = loop.tune(run, host_facts(spec, profile_model(spec.model_path)), executor=RayExecutor(trial_fn=trial))
print("done", len(steps))
"""


def test_a_run_whose_driver_is_killed_resumes_to_the_same_end_and_leaves_nothing_running(head, tiny_model, tmp_path):
    address, env = head
    spec = _spec(tiny_model)
    local = loop.tune(
        Run.create(tmp_path / "local", spec), host_facts(spec, profile_model(tiny_model)), executor=_fake_trial
    )
    Run.create(tmp_path / "ray", spec)
    results = tmp_path / "ray" / "results.jsonl"
    cmd = [sys.executable, "-c", DRIVER, address, str(tmp_path / "ray")]
    driver = subprocess.Popen([*cmd, "1.5"], env=env, cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (results.exists() and results.read_text().count("\n") >= 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    placed = lambda: [p for p in _workers() if "placed" in p]  # noqa: E731
    while not placed() and time.monotonic() < deadline:  # a trial of the first step is running on the cluster
        time.sleep(0.1)
    assert placed(), "no trial was running when the driver was to be killed"
    os.killpg(driver.pid, signal.SIGKILL)  # the driver (ours) dies mid-step, without a word
    driver.wait()
    before = results.read_text()
    assert 1 <= before.count("\n") < len(local)
    deadline = time.monotonic() + 30
    while placed() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert placed() == []  # the dead driver's trials were stopped on the cluster
    done = subprocess.run([*cmd, "0"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    after = results.read_text()
    assert after.startswith(before)  # the finished steps were kept, not re-run
    assert [s["index"] for s in map(json.loads, after.splitlines())] == list(range(len(local)))
    assert _lines(tmp_path / "ray") == _lines(tmp_path / "local")


INTERRUPTED = (
    DRIVER.replace('print("done", len(steps))', "")
    .replace(
        "steps = loop.tune(",
        """import time
try:
    steps = loop.tune(""",
    )
    .replace(
        "executor=RayExecutor(trial_fn=trial))",
        """executor=RayExecutor(trial_fn=trial))
except KeyboardInterrupt:
    print("interrupted", flush=True)
    time.sleep(60)  # alive: what is still running on the cluster now is not the dead driver's clean-up""",
    )
)


def test_ctrl_c_cancels_every_trial_on_the_cluster_the_steps_measured_ahead_too(head, tiny_model, tmp_path):
    address, env = head
    Run.create(tmp_path / "ray", _spec(tiny_model, max_trials=4))
    driver = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, address, str(tmp_path / "ray"), "8"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        placed = lambda: [t for _, t in _processes() if t.startswith("ray::placed")]  # noqa: E731
        while len(placed()) < 2 and time.monotonic() < deadline:  # a step and the next, measured ahead, at once
            time.sleep(0.2)
        assert len(placed()) == 2, placed()
        os.kill(driver.pid, signal.SIGINT)  # Ctrl-C
        assert driver.stdout.readline().strip() == "interrupted"
        deadline = time.monotonic() + 5  # well within the 8 s trials: stopped, not finished
        while placed() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert placed() == [] and driver.poll() is None  # cancelled by the driver, which is still alive
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()


LONG_TRIAL = """
import sys
import ray
from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure.cluster import RayExecutor

ray.init(address=sys.argv[1], log_to_driver=False)
wl = Workload(model=sys.argv[2], prompts=["Once upon a time"], max_new_tokens=256, repeats=200, warmup=0)
RayExecutor()(InferenceConfig(dtype="float32"), wl, sys.argv[2], timeout_s=600)
"""


def test_a_killed_driver_leaves_no_trial_child_running_on_the_node(head, tiny_model, tmp_path):
    """The real isolated trial child, started by a Ray task: the driver dies, the task and its child go too."""
    address, env = head
    driver = subprocess.Popen(
        [sys.executable, "-c", LONG_TRIAL, address, str(tiny_model)], env=env, cwd=tmp_path, start_new_session=True
    )
    deadline, children = time.monotonic() + 180, []
    while not children and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.5)
        tasks = [pid for pid, title in _processes() if title.startswith("ray::placed")]
        children = [pid for pid, title in _processes() if "infertune.measure.worker" in title and _ppid(pid) in tasks]
    assert children, "the trial child never started"
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") for pid in children) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in children)  # the child died with its task


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _processes() -> list[tuple[int, str]]:
    """(pid, command line) of every process here; a Ray worker's command line is its title (`ray::NAME`)."""
    out = []
    for proc in os.listdir("/proc"):
        if proc.isdigit():
            try:
                with open(f"/proc/{proc}/cmdline", "rb") as f:
                    out.append((int(proc), f.read().replace(b"\0", b" ").decode(errors="replace")))
            except OSError:
                continue
    return out


def _workers() -> list[str]:
    """The command lines (process titles) of Ray task workers on this machine: `ray::NAME` while running NAME."""
    out = []
    for proc in os.listdir("/proc"):
        if proc.isdigit():
            try:
                with open(f"/proc/{proc}/cmdline", "rb") as f:
                    title = f.read().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if title.startswith("ray::"):
                out.append(title)
    return out
