"""A trial never outlives the process that started it; what a killed parent left behind is swept later.
Each test looks only at processes it started itself (children of the process it spawned)."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from infertune.measure import lifeline

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc: Linux")


def _gone(p: psutil.Process) -> bool:
    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


HANG = """from transformers import LlamaForCausalLM


class HangingLlama(LlamaForCausalLM):
    def forward(self, *args, **kwargs):  # a worker that hangs mid-generation, writing nothing
        import time

        time.sleep(3600)
"""


@pytest.fixture
def hanging_model(tiny_model, tmp_path):
    """The tiny model with remote code whose forward never returns: a hung trial."""
    import json
    import shutil

    folder = tmp_path / "hanging"
    shutil.copytree(tiny_model, folder)
    (folder / "modeling_hang.py").write_text(HANG)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_hang.HangingLlama"}
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_kill_9_of_measure_takes_its_hung_worker_down_and_a_later_run_sweeps_its_folder(hanging_model, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    parent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infertune",
            "measure",
            "--model",
            str(hanging_model),
            "--trust-remote-code",
            "--max-new-tokens",
            "512",
            "--timeout",
            "600",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    workers: list[psutil.Process] = []
    try:
        me = psutil.Process(parent.pid)

        def worker_runs() -> bool:  # only among the processes this test started
            workers[:] = [c for c in me.children(recursive=True) if "infertune.measure.worker" in " ".join(c.cmdline())]
            return bool(workers)

        assert _wait_for(worker_runs, 120), "the worker never started"
        folders = list(tmp.glob(lifeline.PREFIX + "*"))
        assert len(folders) == 1 and (folders[0] / "owner").read_text().startswith(f"{parent.pid}:")
        time.sleep(8)  # imports, the model load, into the hung forward
        assert not _gone(workers[0]) and parent.poll() is None
        parent.kill()
        parent.wait()
        assert _wait_for(lambda: all(_gone(w) for w in workers), 10), "the worker outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        for w in workers:
            if not _gone(w):
                w.kill()
    assert folders[0].exists()  # nobody removed it: the parent was killed
    assert lifeline.sweep(tmp) == folders and not folders[0].exists()


def test_the_watchdog_ends_a_trial_whose_parent_is_gone(tmp_path):
    """Without the kernel's help (the parent here is not the direct parent, as for a torchrun rank), the
    watchdog thread sees the parent gone and ends the trial's group."""
    stand_in = subprocess.Popen(["sleep", "60"])
    tok = lifeline.token(stand_in.pid)
    code = (
        "import time\nfrom infertune.measure.lifeline import die_with_parent\n"
        "die_with_parent(interval_s=0.1)\nprint('watching', flush=True)\ntime.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, lifeline.PARENT_ENV: tok, "LOCAL_RANK": "0"},
    )
    try:
        assert child.stdout.readline().strip() == "watching"
        stand_in.kill()
        stand_in.wait()
        child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL  # its own group was killed, itself included
    finally:
        for p in (stand_in, child):
            p.kill()
            p.wait()


def test_a_worker_started_for_a_parent_already_gone_stops_at_once(tmp_path):
    stand_in = subprocess.Popen(["true"])
    tok = lifeline.token(stand_in.pid) if psutil.pid_exists(stand_in.pid) else f"{stand_in.pid}:0"
    stand_in.wait()
    code = "from infertune.measure.lifeline import die_with_parent\ndie_with_parent()\nprint('still here')\n"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, lifeline.PARENT_ENV: tok},
        start_new_session=True,
    )
    assert r.returncode != 0 and "still here" not in r.stdout


def test_sweep_removes_only_folders_whose_owner_is_gone(tmp_path):
    mine = tmp_path / (lifeline.PREFIX + "mine")
    dead = tmp_path / (lifeline.PREFIX + "dead")
    unowned = tmp_path / (lifeline.PREFIX + "unowned")
    for d in (mine, dead, unowned):
        d.mkdir()
    (mine / "owner").write_text(lifeline.token())
    (dead / "owner").write_text(f"{os.getpid()}:1.00")  # this pid, another start time: a reused pid
    assert lifeline.sweep(tmp_path) == [dead]
    assert mine.exists() and unowned.exists() and not dead.exists()


def test_a_program_started_through_the_launcher_dies_with_its_parent(tmp_path):
    """transformers serve is not our code: it is started through the launcher, which asks the kernel for
    SIGKILL when its parent goes, then execs it."""
    code = (
        "import subprocess, sys, time\nfrom infertune.measure.lifeline import launcher\n"
        "p = subprocess.Popen([*launcher(), 'sleep', '300'])\nprint(p.pid, flush=True)\ntime.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        assert _wait_for(lambda: child.cmdline()[:1] == ["sleep"], 30)  # exec'ed: it is the program now
        parent.kill()
        parent.wait()
        assert _wait_for(lambda: _gone(child), 10)
    finally:
        parent.kill()
        parent.wait()
        if not _gone(child):
            child.kill()
