"""--device-map auto over weights that do not fit the GPU is accelerate's CPU offload, as the user runs it: the
current setup is estimated with those budgets, not as a model that does not load (the public API on Llama-3-8B's
published config in fp32, 32 GB of weights against a 24 GB card)."""

import json

import pytest

from infertune import api
from tests.advisor.test_advise import LLAMA3_8B

RUN = {"gpu": "RTX 4090", "dtype": "float32", "input_len": 512, "max_new_tokens": 128, "batch": 1, "concurrency": 1}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama3-8b-offload")
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    return str(d)


def test_device_map_auto_over_too_little_gpu_memory_is_the_cpu_offload_it_runs(model):
    a = api.advise(model=model, device_map="auto", cpu_ram="64GiB", lib=["transformers=4.57.0"], **RUN)
    assert a.current.device_map == "auto" and a.current.max_memory is not None
    assert a.current.max_memory["cpu"] == "64GiB" and int(a.current.max_memory["0"].removesuffix("GiB")) < 24
    assert any("offloads the rest to CPU RAM" in x for x in a.assumptions)
    assert a.diagnosis.evidence["fits"]  # it loads: offloaded, not refused
    # offloaded layers cross the host link every step: far slower than the GPU's own bandwidth
    plain = api.advise(model=model, device_map=None, cpu_ram="64GiB", lib=["transformers=4.57.0"], **RUN)
    assert a.diagnosis.evidence["tpot_s"] > 5 * plain.diagnosis.evidence["tpot_s"]


def test_without_the_targets_ram_or_with_weights_that_fit_the_map_is_left_as_it_was(model):
    unknown = api.advise(model=model, device_map="auto", lib=["transformers=4.57.0"], **RUN)
    assert unknown.current.max_memory is None
    fits = api.advise(model=model, device_map="auto", cpu_ram="64GiB", **{**RUN, "dtype": "bfloat16"})
    assert fits.current.max_memory is None and not any("offloads the rest" in x for x in fits.assumptions)


def test_a_user_much_faster_than_the_stated_setup_is_told_to_state_it_as_it_runs(model):
    a = api.advise(model=model, device_map="auto", cpu_ram="64GiB", observed={"tokens_per_s": 100}, **RUN)
    assert any(
        "faster than the expected" in e and "say it as it runs" in e for x in a.diagnosis.ranked for e in x.evidence
    )
