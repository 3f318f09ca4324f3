"""Trials forked from the warm launcher (measure/zygote.py): the same results as cold trials, the same isolation."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure import machine, run_trial
from infertune.measure.zygote import current, warm_start

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm launcher forks (Linux)")


def _cpu(r) -> float:
    """A lower bound of a trial's CPU time: its timed pass ran on at least one core."""
    return sum(r.metrics.pass_s or [])


def _workers(root: psutil.Process) -> list[psutil.Process]:
    return [c for c in root.children(recursive=True) if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_a_forked_trial_measures_what_a_cold_one_does(tiny_model):
    wl = Workload(model=str(tiny_model), prompts=["Paris is", "The sea"], max_new_tokens=8, warmup=0)
    cold = run_trial(InferenceConfig(), wl, tiny_model, timeout_s=300)
    counted = [machine._forked_cpu_s[0]]
    with warm_start(tiny_model) as z:
        assert z is not None and current() is z
        events: list[dict] = []
        warm = [run_trial(InferenceConfig(), wl, tiny_model, timeout_s=300, on_event=events.append) for _ in range(2)]
        launcher = psutil.Process(z.proc.pid)
        assert launcher.is_running()
        counted.append(machine._forked_cpu_s[0])
    assert [r.status for r in warm] == ["ok", "ok"], [r.error for r in warm]
    for r in warm:
        assert [o.output_token_ids for o in r.outputs] == [o.output_token_ids for o in cold.outputs]
        assert r.metrics.peak_memory_bytes > 0 and r.metrics.tpot_s > 0
    assert {"generate", "load"} <= {e.get("phase") for e in events}  # progress reaches the parent as before
    # the launcher reaps its trials, so it tells their CPU time (and its own imports'): the machine watch counts them
    # as ours, not as other work that made the machine busy
    assert counted[1] - counted[0] >= sum(_cpu(r) for r in warm) * 0.5 > 0
    assert not launcher.is_running() or launcher.status() == psutil.STATUS_ZOMBIE  # closed with its block
    assert current() is None


def test_a_forked_trial_that_times_out_is_killed_with_its_group(tiny_model):
    short = Workload(model=str(tiny_model), prompts=["Hi"], max_new_tokens=2, warmup=0)
    long = Workload(model=str(tiny_model), prompts=["Hi"], max_new_tokens=4096, ignore_eos=True, repeats=20)
    with warm_start(tiny_model) as z:
        assert z is not None
        assert run_trial(InferenceConfig(), short, tiny_model).status == "ok"  # the launcher is warm now
        r = run_trial(InferenceConfig(), long, tiny_model, timeout_s=2)
        assert r.status == "timeout" and "timed out after 2 s" in r.error
        time.sleep(0.5)
        assert _workers(psutil.Process(z.proc.pid)) == []  # the zygote's child went; the zygote stays
        after = run_trial(InferenceConfig(), short, tiny_model)
        assert after.status == "ok", after.error


def test_a_trial_past_its_memory_limit_is_oom_when_forked(tiny_model):
    wl = Workload(model=str(tiny_model), prompts=["Hello"], input_len=2048, batch=4, max_new_tokens=2, warmup=0)
    with warm_start(tiny_model):
        starved = run_trial(InferenceConfig(attn_implementation="eager"), wl, tiny_model, memory_limit_bytes=128 << 20)
    assert starved.status == "oom", (starved.error, starved.log_tail)


def test_a_dead_launcher_or_another_environment_means_a_cold_start(tiny_model, monkeypatch):
    wl = Workload(model=str(tiny_model), prompts=["Hi"], max_new_tokens=2, warmup=0)
    with warm_start(tiny_model) as z:
        assert z is not None
        z.proc.kill()
        z.proc.wait()
        assert current() is None
        assert run_trial(InferenceConfig(), wl, tiny_model).status == "ok"
    with warm_start(tiny_model) as z:
        assert z is not None
        monkeypatch.setenv("HF_HOME", "/elsewhere")  # read at import: the zygote's imports no longer match
        assert not z.serves({**os.environ})
        assert run_trial(InferenceConfig(), wl, tiny_model).status == "ok"


def test_cold_trials_when_asked(monkeypatch, tiny_model):
    monkeypatch.setenv("INFERTUNE_COLD_TRIALS", "1")
    with warm_start(tiny_model) as z:
        assert z is None and current() is None


def test_the_launcher_and_its_trials_die_with_their_parent(tiny_model, tmp_path):
    """kill -9 of the process that opened the block takes the zygote and a running trial down."""
    wl = Workload(model=str(tiny_model), prompts=["Hi"], max_new_tokens=4096, ignore_eos=True, warmup=0)
    code = (
        "import sys, threading\n"
        "from infertune.core.config import InferenceConfig\nfrom infertune.core.workload import Workload\n"
        "from infertune.measure import run_trial\nfrom infertune.measure.zygote import warm_start\n"
        f"wl = Workload.model_validate_json({wl.model_dump_json()!r})\n"
        f"with warm_start({str(tiny_model)!r}) as z:\n"
        "    print(z.proc.pid, flush=True)\n"
        f"    run_trial(InferenceConfig(), wl, {str(tiny_model)!r}, timeout_s=600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        zygote = psutil.Process(int(parent.stdout.readline()))
        deadline = time.monotonic() + 120
        while not _workers(zygote) and time.monotonic() < deadline:  # the trial has been forked
            time.sleep(0.2)
        trials = _workers(zygote)
        assert trials, "no trial was forked"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        gone, alive = psutil.wait_procs([zygote, *trials], timeout=15)
        assert alive == []
    finally:
        parent.kill()
        parent.wait()
