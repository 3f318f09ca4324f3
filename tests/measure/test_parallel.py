"""Tensor-parallel trials under torchrun (gloo on this CPU) and device_map trials, on the tiny model."""

import ast
import json
import subprocess
import sys

import numpy as np
import pytest

from infertune import api
from infertune.core.config import InferenceConfig
from infertune.core.errors import UserError
from infertune.core.workload import Workload
from infertune.measure import run_trial
from infertune.measure.quality import REFERENCE_TEXT


@pytest.fixture(scope="module")
def tp_pair(tiny_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tp")
    wl = Workload(
        model=str(tiny_model), prompts=["Once upon a time", "The sea is"], max_new_tokens=6, warmup=0, ignore_eos=True
    )
    return {
        tp: run_trial(
            InferenceConfig(tp_size=tp),
            wl,
            tiny_model,
            timeout_s=300,
            reference_text=REFERENCE_TEXT,
            logprobs_path=tmp / f"tp{tp}.npy",
        )
        for tp in (1, 2)
    }, tmp


def test_tp2_matches_one_process_and_reports_every_rank(tp_pair):
    (r, tmp) = tp_pair
    one, two = r[1], r[2]
    assert one.status == "ok" and two.status == "ok", (two.error, two.log_tail)
    assert [o.output_token_ids for o in two.outputs] == [o.output_token_ids for o in one.outputs]
    # teacher-forced log-probs of the reference text, over the whole vocabulary: the same model, split in two
    assert np.abs(np.load(tmp / "tp1.npy") - np.load(tmp / "tp2.npy")).max() < 1e-5
    m = two.metrics
    assert [p.rank for p in m.per_rank] == [0, 1] and all(p.peak_memory_bytes > 0 for p in m.per_rank)
    assert m.peak_memory_sum_bytes == sum(p.peak_memory_bytes for p in m.per_rank)
    assert m.peak_memory_bytes == max(p.peak_memory_bytes for p in m.per_rank)
    assert one.metrics.per_rank is None and two.config.label() == "tp=2"


def test_a_tp_size_that_does_not_split_the_heads_is_refused_before_launch(tiny_model):
    with pytest.raises(UserError, match="tp size 3 does not divide 4 attention heads and 2 KV heads.*sizes that do: 2"):
        api.measure(model=str(tiny_model), tp=3)
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "measure", "--model", str(tiny_model), "--tp", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--tp 3" in r.stderr


def test_device_map_trial_reports_its_placement(tiny_model):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "infertune",
            "measure",
            "--model",
            str(tiny_model),
            "--device-map",
            "auto",
            "--max-memory",
            "cpu=2GiB",
            "--max-new-tokens",
            "2",
            "--warmup",
            "0",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["status"] == "ok", d.get("error")
    assert d["metrics"]["placement"] == {"": "cpu"} and d["config"]["max_memory"] == {"cpu": "2GiB"}


def test_multi_device_settings_are_validated_and_become_code():
    with pytest.raises(ValueError, match="give device_map too"):
        InferenceConfig(max_memory={"0": "20GiB"})
    with pytest.raises(ValueError, match="not with device_map"):
        InferenceConfig(tp_size=2, device_map="auto")
    with pytest.raises(UserError, match="DEVICE=SIZE"):
        api.parse_budgets("0:20GiB")
    assert api.parse_budgets("cuda:0=20GiB, cpu=64GiB") == {"0": "20GiB", "cpu": "64GiB"}
    code = InferenceConfig(tp_size=4, dtype="bfloat16").python_snippet("org/m")
    ast.parse(code)
    assert code.startswith("# launch: torchrun --nproc-per-node 4")
    assert "distributed_config=DistributedConfig(tp_size=4, tp_plan='auto')" in code and "device_map" not in code


def test_offloaded_layers_are_placed_as_estimated_and_their_slowdown_is_measured(tmp_path):
    """A CPU budget that holds the embedding and one of three layers: transformers sends the other two to
    disk (an offload folder the trial provides); the estimate names the same split, and the trial times
    each layer's forward by where its weights live."""
    from infertune.estimate.memory import EstimateSettings, estimate_memory
    from infertune.probe.model import profile_model
    from tests.conftest import build_tiny_model

    folder = build_tiny_model(tmp_path / "m3", layers=3)
    prof = profile_model(folder)
    weights = estimate_memory(prof, EstimateSettings(dtype="float32")).weights_bytes
    embed = prof.param_groups["embedding"] * 4
    layer = (weights - embed) / 3
    budget = int(embed + 2.5 * layer)  # one layer, plus the room for one more that accelerate keeps free
    r = api.measure(
        model=str(folder), dtype="float32", device_map="auto", max_memory=f"cpu={budget}", max_new_tokens=4, warmup=0
    )
    assert r.status == "ok", (r.error, r.log_tail)
    m = r.metrics
    assert set(m.placement.values()) == {"cpu", "disk"}
    assert r.estimate.predicted_layers == r.estimate.measured_layers == {"cpu": 1, "disk": 2}
    assert set(m.layer_forward_s) == {"cpu", "disk"}
    assert m.offload_slowdown == pytest.approx(m.layer_forward_s["disk"] / m.layer_forward_s["cpu"], rel=0.5)
    assert m.offload_slowdown > 1  # reading weights back from the offload folder is never free


def test_mlp_only_plan_splits_the_mlp_replicates_attention_and_matches_one_process(tp_pair, tiny_model):
    (r, _) = tp_pair
    from infertune.probe.model import mlp_only_tp_plan

    plan = mlp_only_tp_plan(str(tiny_model))
    assert plan == {f"model.layers.*.self_attn.{k}": "replicate" for k in ("q_proj", "k_proj", "v_proj", "o_proj")}
    wl = Workload(
        model=str(tiny_model), prompts=["Once upon a time", "The sea is"], max_new_tokens=6, warmup=0, ignore_eos=True
    )
    mlp = run_trial(InferenceConfig(tp_size=2, tp_plan=plan), wl, tiny_model, timeout_s=300)
    assert mlp.status == "ok", (mlp.error, mlp.log_tail)
    assert [o.output_token_ids for o in mlp.outputs] == [o.output_token_ids for o in r[1].outputs]
    assert [p.rank for p in mlp.metrics.per_rank] == [0, 1] and mlp.config.label() == "tp=2, tp_plan=mlp"
    # a run file says `tp_plan: mlp`; the trial resolves it for the model (same tokens, the dict in its result)
    named = run_trial(InferenceConfig(tp_size=2, tp_plan="mlp"), wl, tiny_model, timeout_s=300)
    assert named.status == "ok" and named.outputs == mlp.outputs and named.config.label() == "tp=2, tp_plan=mlp"
    code = mlp.config.python_snippet("m", tp=2)
    assert "tp_plan={'model.layers.*.self_attn.q_proj': 'replicate'" in code
    ast.parse(code)


def test_tp_problems_name_the_mlp_plan_when_only_the_heads_are_in_the_way():
    from infertune.techniques.parallel import tp_problems
    from tests.estimate.test_estimate import llama

    (problem,) = tp_problems(llama(), 2)  # SmolLM2: 9 heads, 3 KV heads, 1536 MLP columns
    assert problem.startswith("tp size 2 does not divide 9 attention heads and 3 KV heads (sizes that do: 3)")
    assert "--tp-plan mlp splits only the MLP (1536 columns)" in problem
    assert tp_problems(llama(), 2, "mlp") == [] and tp_problems(llama(), 4, "mlp") == []
    assert tp_problems(llama(), 5, "mlp") == [
        "tp size 5 does not divide 1536 MLP columns (sizes that do: 2, 3, 4, 6, 8)"
    ]
    with pytest.raises(ValueError, match="give tp_size > 1"):
        InferenceConfig(tp_plan={"model.layers.*.self_attn.q_proj": "replicate"})
