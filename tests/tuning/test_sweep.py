"""`infertune sweep`: every configuration of a grid, one trial each, here or side by side on a real Ray head's
two devices (tests/measure/ray_head.py), on the fixed fake-timing backend; durable and resumable; bad input
refused in one line."""

import functools
import itertools
import time

import pytest

from infertune.core.errors import UserError
from infertune.core.workload import Workload
from infertune.techniques import Setup
from infertune.tuning.sweep import SweepRun, SweepSpec, by_device, grid_setups, sweep
from tests.measure.ray_head import ray_head, timed_fake

GRID = {"dtype": ["float32", "bfloat16"], "attn": ["sdpa", "eager"]}


def _spec(models=("m",)) -> SweepSpec:
    wl = Workload(model=models[0], prompts=["hi"], max_new_tokens=4, warmup=0)
    return SweepSpec(models=list(models), model_paths=list(models), workload=wl, start=Setup(), grid=GRID)


def _summary(points):
    return [(p.index, p.model, p.changes, p.objective, p.trial.status) for p in points]


def test_a_sweep_here_measures_every_configuration_once_and_resumes_the_rest(tmp_path):
    calls = []

    def counted(config, workload, model_path, **kw):
        calls.append((workload.model, str(config.dtype), config.attn_implementation))
        return timed_fake(config, workload, model_path, **kw)

    spec = _spec(("m1", "m2"))
    done = sweep(SweepRun.create(tmp_path / "s", spec), counted)
    assert len(done) == len(calls) == 8 and len(set(calls)) == 8  # 2 models x 2 dtypes x 2 attentions
    ranked = by_device(done, "latency")
    assert list(ranked) == ["here"] and ranked["here"][0].changes["dtype"] == "bfloat16"
    lines = (tmp_path / "s" / "sweep.jsonl").read_text().splitlines()
    (tmp_path / "s" / "sweep.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])  # killed mid-write
    calls.clear()
    again = sweep(SweepRun(tmp_path / "s"), counted)
    assert len(calls) == 5 and _summary(again) == _summary(done)  # only the unfinished ones ran again
    with pytest.raises(UserError, match="already holds a sweep"):
        SweepRun.create(tmp_path / "s", spec)


@pytest.fixture()
def head(monkeypatch):
    with ray_head() as (address, env):
        for k in ("RAY_AUTH_MODE", "PYTHONPATH"):
            monkeypatch.setenv(k, env[k])
        yield address


def test_a_sweep_on_ray_runs_side_by_side_on_both_devices_with_the_same_results(head, tmp_path):
    import ray

    from infertune.measure.cluster import RayExecutor

    here = sweep(SweepRun.create(tmp_path / "here", _spec()), timed_fake)
    ray.init(address=head, log_to_driver=False)
    try:
        ex = RayExecutor(trial_fn=functools.partial(timed_fake, delay_s=1.0))
        assert ex.lanes() == [{"device": "infertune_device_0"}, {"device": "infertune_device_1"}]
        on_ray = sweep(SweepRun.create(tmp_path / "ray", _spec()), ex)
    finally:
        ray.shutdown()
    assert _summary(on_ray) == _summary(here)  # the same configurations, measured the same
    where = [p.trial.environment["placement"]["device"] for p in on_ray]
    assert set(where) == {"infertune_device_0", "infertune_device_1"}
    spans = sorted(
        (p.trial.environment["began"], p.trial.environment["ended"], d) for p, d in zip(on_ray, where, strict=True)
    )
    overlapped = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert overlapped and all(a[2] != b[2] for a, b in overlapped)  # side by side, never two on one device
    assert (tmp_path / "ray" / "sweep.jsonl").read_text().count('"placement":{"node"') == 4  # the driver wrote where


def test_bad_grids_are_refused_in_one_line(tmp_path):
    from tests.cli.test_bad_input import invoke

    with pytest.raises(UserError, match="not a knob"):
        grid_setups(Setup(), {"colour": ["red"]})
    with pytest.raises(UserError, match="kv_cache=bogus"):
        grid_setups(Setup(), {"kv_cache": ["static", "bogus"]})
    for args, needle in (
        (("--grid", "colour=red,blue"), "--grid colour: not a knob"),
        (("--grid", "dtype"), "--grid 'dtype': KNOB=VALUE,VALUE"),
        (("--grid", "kv_cache=static,bogus"), "--grid kv_cache=bogus"),
        (("--grid", "dtype=float32,float77"), "--grid dtype=float77: Input should be 'auto', 'float32'"),
        (("--grid", "attn=sdpa,bogus"), "--grid attn=bogus: unknown attention implementation 'bogus'"),
        (("--grid", "dtype=float32"), "nothing to sweep"),
        (("--grid", "dtype=float32,bfloat16", "--cluster", "dask"), "--cluster must be 'ray' or 'ray=ADDRESS'"),
    ):
        how, code, err = invoke("sweep", "--model", "x", *args, cwd=tmp_path)
        assert (how, code) == ("exit", 2) and err.strip().count("\n") == 0 and needle in err, err


def test_the_api_sweeps_the_tiny_model_here_and_the_cli_ranks_it(tiny_model, tmp_path, capsys):
    """The real path: sweep_spec, the isolated trial child per configuration, the run directory, the table."""
    from infertune import api
    from infertune.cli.sweep import show

    out = api.sweep(
        models=[str(tiny_model)], grid=["attn=sdpa,eager"], max_new_tokens=4, repeats=1, output=tmp_path / "s"
    )
    assert [p.changes for p in out.points] == [{"attn": "sdpa"}, {"attn": "eager"}]
    assert all(p.trial.status == "ok" and p.objective == p.trial.metrics.e2e_s for p in out.points)
    assert list(out.ranking) == ["here"] and sorted(out.ranking["here"]) == [0, 1]
    show(out)
    table = capsys.readouterr().out
    assert "here: latency (s), best first" in table and "attn=eager" in table and "attn=sdpa" in table
    with pytest.raises(UserError, match="continues that sweep as it was specified"):
        api.sweep(resume=tmp_path / "s", grid=["attn=sdpa,eager"])
    assert api.sweep(resume=tmp_path / "s").points == out.points  # nothing left to run: the same points


SWEEP_DRIVER = """
import functools, sys, time
from pathlib import Path
import ray
from infertune.measure.cluster import RayExecutor
from infertune.tuning.sweep import SweepRun, sweep
from tests.measure.ray_head import timed_fake

ray.init(address=sys.argv[1], log_to_driver=False)
try:
    sweep(SweepRun(Path(sys.argv[2])), RayExecutor(trial_fn=functools.partial(timed_fake, delay_s=8.0)))
except KeyboardInterrupt:
    print("interrupted", flush=True)
    time.sleep(60)  # alive: what still runs on the cluster now is not the dead driver's clean-up
"""


def test_ctrl_c_stops_every_lane_of_a_sweep_on_the_cluster(head, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from tests.measure.ray_head import driver_env
    from tests.tuning.test_cluster_tune import _processes

    SweepRun.create(tmp_path / "s", _spec())
    driver = subprocess.Popen(
        [sys.executable, "-c", SWEEP_DRIVER, head, str(tmp_path / "s")],
        env=driver_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    placed = lambda: [t for _, t in _processes() if t.startswith("ray::placed")]  # noqa: E731
    try:
        deadline = time.monotonic() + 120
        while len(placed()) < 2 and time.monotonic() < deadline:  # both lanes busy
            time.sleep(0.2)
        assert len(placed()) == 2, placed()
        os.kill(driver.pid, signal.SIGINT)
        assert driver.stdout.readline().strip() == "interrupted"
        deadline = time.monotonic() + 5  # well within the 8 s trials: stopped, not finished
        while placed() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert placed() == [] and driver.poll() is None
        assert not (tmp_path / "s" / "sweep.jsonl").exists()  # nothing was written for the cancelled trials
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
