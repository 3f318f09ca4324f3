"""A node lost mid-trial, on a real multi-node Ray cluster on this machine (ray.cluster_utils.Cluster: a head and
two worker nodes, a device resource each): the trial is retried once on the other node, the step's pin moves
with it, and the result says what was lost."""

import os
import threading
import time

import pytest

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure.results import TrialResult
from tests.measure.ray_head import driver_env, slow_once

ray = pytest.importorskip("ray")


def test_a_node_lost_mid_trial_is_retried_on_the_other_node_and_the_pin_moves(monkeypatch, tmp_path):
    import functools

    from ray.cluster_utils import Cluster

    from infertune.measure.cluster import RayExecutor

    for k, v in driver_env().items():  # the nodes below: this checkout's code, no token (as the driver here)
        if k in ("RAY_AUTH_MODE", "PYTHONPATH"):
            monkeypatch.setenv(k, v)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        a = cluster.add_node(num_cpus=1, resources={"infertune_device_0": 1})
        cluster.add_node(num_cpus=1, resources={"infertune_device_1": 1})
        ray.init(address=cluster.address, log_to_driver=False)
        marker = str(tmp_path / "first-attempt")
        ex = RayExecutor(trial_fn=functools.partial(slow_once, marker=marker))
        assert ex.devices == ["infertune_device_0", "infertune_device_1"]
        wl = Workload(model="m", prompts=["hi"], max_new_tokens=2, warmup=0)
        out: list[TrialResult] = []

        def step():  # a step (its pin is its thread's): its first trial goes to infertune_device_0, on node a
            ex.pin()
            out.append(ex(InferenceConfig(), wl, "m"))
            out.append(ex.pinned)

        runner = threading.Thread(target=step)
        runner.start()
        deadline = time.monotonic() + 120
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert os.path.exists(marker), "the first attempt never started"
        cluster.remove_node(a, allow_graceful=False)  # node a dies mid-trial
        runner.join(timeout=180)
        assert not runner.is_alive() and len(out) == 2
        r, pinned = out
        assert r.status == "ok" and len(r.environment["lost"]) == 1, r.environment
        assert any(k in r.environment["lost"][0] for k in ("NodeDied", "WorkerCrashed", "ObjectLost", "Unschedulable"))
        assert r.environment["placement"]["device"] == "infertune_device_1"  # retried on the other node
        assert pinned["device"] == "infertune_device_1" and pinned["node"] == r.environment["placement"]["node"]
    finally:
        ray.shutdown()
        cluster.shutdown()
