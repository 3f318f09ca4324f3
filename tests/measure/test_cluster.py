"""Trials on a real local Ray instance (2 CPUs, two custom "device" resources): placement, retry, refusal."""

import os
import re

import pytest

from infertune.core.config import InferenceConfig
from infertune.core.errors import UserError
from infertune.core.workload import Workload
from infertune.measure.cluster import parse_cluster

ray = pytest.importorskip("ray")

from infertune.measure.cluster import RayExecutor  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, resources={"dev0": 1, "dev1": 1}, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _args():
    return (InferenceConfig(), Workload(model="m", prompts=["hi"], max_new_tokens=2, warmup=0), "m")


def test_parse_cluster():
    assert parse_cluster("ray") is None
    assert parse_cluster("ray=10.0.0.1:6379") == "10.0.0.1:6379"
    for bad in ("dask", "ray=", "rays"):
        with pytest.raises(UserError, match="--cluster"):
            parse_cluster(bad)


def test_trial_runs_on_the_device_it_asked_for(local_ray):
    from infertune.measure.results import TrialResult

    def fake(config, workload, model_path, **kw):
        return TrialResult(
            status="ok", config=config, workload=workload, model_path=str(model_path), environment={"pid": os.getpid()}
        )

    ex = RayExecutor(trial_fn=fake)
    results = [ex(*_args(), device=d) for d in ("dev0", "dev1", "dev0")]
    assert [r.status for r in results] == ["ok"] * 3
    placed = [r.environment["placement"] for r in results]
    assert [p["device"] for p in placed] == ["dev0", "dev1", "dev0"]
    assert all(p["node"] == ray.get_runtime_context().get_node_id() for p in placed)
    assert all(r.environment["pid"] != os.getpid() for r in results)  # ran in a Ray worker, not here
    assert ex.pending == []


def test_a_killed_worker_is_a_failed_then_retried_trial(local_ray, tmp_path):
    from infertune.measure.results import TrialResult

    marker = str(tmp_path / "died-once")

    def dies_once(config, workload, model_path, **kw):
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies mid-trial, as on a lost node
        return TrialResult(status="ok", config=config, workload=workload, model_path=str(model_path))

    r = RayExecutor(trial_fn=dies_once)(*_args(), device="dev1")
    assert r.status == "ok"
    assert len(r.environment["lost"]) == 1 and "WorkerCrashedError" in r.environment["lost"][0]
    assert r.environment["placement"]["device"] == "dev1"

    def always_dies(config, workload, model_path, **kw):
        os._exit(1)

    r = RayExecutor(trial_fn=always_dies)(*_args())
    assert r.status == "error" and r.error.startswith("lost on the cluster 2 times")


def test_without_ray_the_flag_is_refused_in_one_line(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *a, **kw):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    from infertune.measure.cluster import require_ray

    with pytest.raises(UserError, match=r"pip install 'infertune\[cluster\]'"):
        require_ray()


def test_a_tune_through_ray_gives_the_local_verdicts_and_says_where_each_trial_ran(local_ray, tiny_model, tmp_path):
    """The real loop and the real isolated trial child, on the tiny model, once locally and once through Ray."""
    from infertune.api import host_facts
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup
    from infertune.tuning.loop import tune
    from infertune.tuning.run import Run, TuneSpec

    wl = Workload(model=str(tiny_model), prompts=["Once upon a time"], max_new_tokens=4, warmup=0)
    spec = TuneSpec(
        model=str(tiny_model),
        model_path=str(tiny_model),
        workload=wl,
        objective="memory",
        start=Setup(dtype="float32", attn="eager"),
        max_trials=2,
        trial_timeout_s=300,
        min_pairs=2,
        max_pairs=2,
    )
    facts = host_facts(spec, profile_model(str(tiny_model)))
    local = tune(Run.create(tmp_path / "local", spec), facts)
    on_ray = tune(Run.create(tmp_path / "ray", spec), facts, executor=RayExecutor())
    assert [s.technique for s in on_ray] == [s.technique for s in local]  # the same steps, in the same order
    assert all(s.trial.status == "ok" for s in on_ray)
    node = ray.get_runtime_context().get_node_id()
    assert all(s.trial.environment["placement"]["node"] == node for s in on_ray)
    saved = (tmp_path / "ray" / "results.jsonl").read_text()
    assert '"placement"' in saved  # the run directory says where each trial ran


def test_cli_refuses_a_bad_cluster_in_one_line(tmp_path):
    from tests.cli.test_bad_input import invoke

    how, code, err = invoke("tune", "--model", "x", "--cluster", "dask", cwd=tmp_path)
    assert (how, code) == ("exit", 2)
    assert err.strip().count("\n") == 0 and "--cluster must be 'ray' or 'ray=ADDRESS'" in err


def test_the_run_file_takes_cluster_and_the_flag_wins(tmp_path):
    """`cluster:` in a run file: tune's (the flag over it), left alone by the verbs that read the workload only."""
    from infertune import api
    from infertune.core.workload import load_run
    from infertune.measure.cluster import check_cluster
    from tests.cli.test_bad_input import invoke

    good, bad, odd = tmp_path / "good.yaml", tmp_path / "bad.yaml", tmp_path / "odd.yaml"
    good.write_text("model: m\nmax_new_tokens: 4\ncluster: ray=10.0.0.5:6379\n")
    bad.write_text("workload:\n  model: m\ncluster: dask\n")
    odd.write_text("model: m\ncluster: [ray]\n")
    assert load_run(good)[0].max_new_tokens == 4  # measure and advise read the same file and leave cluster:
    assert check_cluster(None, good) == "ray=10.0.0.5:6379" and check_cluster("ray", good) == "ray"
    assert check_cluster(None, None) is None
    for path, needle in ((bad, "--cluster must be 'ray' or 'ray=ADDRESS' (got 'dask')"), (odd, "'cluster' must be")):
        with pytest.raises(UserError, match=re.escape(needle)):
            api.tune(path)
        how, code, err = invoke("tune", str(path), cwd=tmp_path)
        assert (how, code) == ("exit", 2) and err.strip().count("\n") == 0 and needle in err
    assert not any(tmp_path.glob("infertune-runs"))  # refused before any run directory


def test_gpu_name_and_driver_are_read_from_nvidia_smi_for_the_gpus_ray_gave(tmp_path):
    """A stand-in nvidia-smi (an executable printing what the real one prints for --query-gpu) on a 2-GPU node."""
    from infertune.measure.cluster_node import gpu_facts

    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho '0, GPU-aaa, NVIDIA H100 80GB HBM3, 550.54.15'\necho '1, GPU-bbb, NVIDIA A10G, 550.54.15'\n"
    )
    smi.chmod(0o755)
    assert gpu_facts(["1"], str(smi)) == {"gpu_name": "NVIDIA A10G", "driver": "550.54.15"}
    assert gpu_facts(["GPU-aaa"], str(smi))["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert gpu_facts([], str(smi)) == {} and gpu_facts(["7"], str(smi)) == {}
    assert gpu_facts(["0"], str(tmp_path / "absent")) == {}


def test_the_driver_alone_writes_the_reference_logprobs(local_ray, tmp_path):
    """The trial writes its log-probs in a folder of the node's own; the driver writes them into the run folder."""
    import numpy as np

    from infertune.measure.results import TrialResult

    def writes(config, workload, model_path, logprobs_path=None, **kw):
        np.save(logprobs_path, np.arange(5, dtype=np.float32))
        env = {"wrote": str(logprobs_path)}
        return TrialResult(status="ok", config=config, workload=workload, model_path=str(model_path), environment=env)

    target = tmp_path / "run" / "logprobs" / "step-3.npy"
    r = RayExecutor(trial_fn=writes)(*_args(), logprobs_path=target)
    assert r.status == "ok" and r.environment["wrote"] != str(target)  # the node wrote elsewhere
    assert not os.path.exists(r.environment["wrote"])  # and cleaned up after itself
    assert np.load(target).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_tensor_parallel_trial_holds_its_ranks_in_one_placement_group_on_one_node(local_ray):
    """TP=2 on a 2-CPU node: a STRICT_PACK group of two bundles (rank 0's with the device), freed after; TP=3
    cannot be held by any node: a failed trial saying so, not a wait forever."""
    from infertune.measure.results import TrialResult

    def inside(config, workload, model_path, **kw):
        pg = ray.util.get_current_placement_group()
        env = {"bundles": pg.bundle_specs, "free_cpus": ray.available_resources().get("CPU", 0.0)}
        return TrialResult(status="ok", config=config, workload=workload, model_path=str(model_path), environment=env)

    tp2 = (InferenceConfig(tp_size=2), *_args()[1:])
    ex = RayExecutor(trial_fn=inside)
    r = ex(*tp2, device="dev1")
    assert r.status == "ok" and r.environment["placement"]["ranks"] == 2
    assert r.environment["bundles"] == [{"CPU": 1.0, "dev1": 1.0}, {"CPU": 1.0}]
    assert r.environment["free_cpus"] == 0.0  # both ranks' CPUs held while the trial ran
    assert ex.gangs == {} and all(g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())
    ex.gang_timeout_s = 2
    r = ex(InferenceConfig(tp_size=3), *_args()[1:])
    assert r.status == "error" and r.error == "not run: no node of the cluster holds its 3 ranks (2 s)"
