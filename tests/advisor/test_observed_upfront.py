"""An out-of-memory seen while loading where the weights fit but the workload's state does not (a cache reserved up
front), and the moves that relieve a memory finding where none of its own kind applies (real advisor runs on
Llama-3-8B's published config, tests/advisor/test_advise.py's facts)."""

import json

import pytest

from infertune.advisor.advise import advise
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques.base import Observed
from tests.advisor.test_advise import LLAMA3_8B, facts


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama3-8b-upfront")
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    return profile_model(d)


def _big_cache(llama8b):
    # 16-bit 8B weights (about 15 GiB) fit a 24 GB A10G; 8 sequences of 8k tokens of cache (8 GiB) do not
    return facts(llama8b, "A10G", input_len=7000, max_new_tokens=1000, batch=8)


def test_an_oom_at_load_with_weights_that_fit_is_the_cache_reserved_up_front(llama8b):
    f = _big_cache(llama8b)
    before = advise(f, Setup(dtype="bfloat16", kv_cache="static"))
    assert not before.diagnosis.evidence["fits"] and before.diagnosis.bottleneck == "kv-cache-growth"
    f.observed = Observed(oom="load")
    a = advise(f, Setup(dtype="bfloat16", kv_cache="static"))
    top = a.diagnosis.ranked[0]
    assert (top.category, top.severity) == ("kv-cache-growth", "blocking")
    assert "the weights fit" in top.evidence[0] and "up front" in top.evidence[0]
    assert a.next is not None and "kv-cache-growth" in a.next.addresses


def test_an_oom_at_load_with_weights_that_do_not_fit_stays_the_load(llama8b):
    f = facts(llama8b, "T4")  # the weights alone do not fit: the load's, whatever the cache
    f.observed = Observed(oom="load")
    a = advise(f, Setup(dtype="float16"))
    assert a.diagnosis.bottleneck == "load-memory"


def test_a_memory_finding_without_a_move_of_its_kind_takes_one_that_frees_the_device(llama8b):
    # continuous batching keeps its own paged cache: no KV move applies; a weight move frees room for the cache
    f = _big_cache(llama8b)
    f.observed = Observed(oom="load")
    a = advise(f, Setup(dtype="bfloat16", batching="continuous"))
    rejected = {r.technique for r in a.rejected}
    assert {"kv-quantized", "kv-offloaded"} <= rejected
    assert a.diagnosis.ranked[0].severity == "blocking" and a.diagnosis.bottleneck != "load-memory"
    assert a.next is not None and "load-memory" in a.next.addresses
    assert a.next.expected.peak_bytes_after < a.next.expected.peak_bytes_before


def test_a_host_ram_finding_is_never_relieved_by_freeing_the_gpu(tmp_path):
    # host RAM at load is not the device's pool: a KV-cache move frees GPU memory and does nothing for it
    d = tmp_path / "bin-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    for i in (1, 2):
        with open(d / f"pytorch_model-0000{i}-of-00002.bin", "wb") as shard:
            shard.truncate(9_950_000_000)  # sparse: its size, no disk
    f = facts(profile_model(d), "T4")
    f.cpu_ram_bytes = int(12.7 * 2**30)
    f.stated = {"transformers": "4.35.2", "accelerate": "0.24.1", "bitsandbytes": "0.41.2"}
    f.observed = Observed(oom="host-ram")
    a = advise(f, Setup(dtype="float16", quantization="bnb-4bit"))
    top = a.diagnosis.ranked[0]
    assert top.category == "load-memory" and top.evidence[0].startswith("host RAM at load")
    assert a.next is not None and a.next.technique not in ("kv-offloaded", "kv-quantized", "kv-sliding-window")
