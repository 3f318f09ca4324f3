"""What a move costs is said for the setup it ships on the target it runs on: a bf16 result on a CPU does not
list float16's overflow or its CPU emulation; float16 on a GPU lists its overflow, not CPU costs."""

import pytest

from infertune.techniques import REGISTRY, Setup
from tests.scenario_models import LLAMA3_8B, cpu, facts, profile


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return profile(tmp_path_factory, LLAMA3_8B)


def test_dtype_tradeoffs_follow_the_shipped_dtype_and_the_target(llama):
    dtype = REGISTRY["dtype"]
    avx2 = cpu().model_copy(update={"cpu_flags": ["avx2", "fma"]})  # a stated CPU without native bf16
    on_cpu = dtype.tradeoffs_for(facts(llama, avx2), Setup(dtype="bfloat16"))
    assert any("CPUs without native bf16" in t for t in on_cpu)
    assert not any("overflow" in t or "emulated" in t for t in on_cpu)
    for native in (["avx512f", "avx512_bf16"], ["amx_tile", "amx_bf16"], ["asimd", "bf16"]):  # x86 and ARM
        shipped = dtype.tradeoffs_for(
            facts(llama, cpu().model_copy(update={"cpu_flags": native})), Setup(dtype="bfloat16")
        )
        assert shipped and not any("without native bf16" in t for t in shipped)
    on_gpu = dtype.tradeoffs_for(facts(llama, "A10G"), Setup(dtype="float16"))
    assert any("overflow" in t for t in on_gpu) and not any("CPU" in t for t in on_gpu)
    assert dtype.tradeoffs_for(facts(llama, cpu()), Setup(dtype="float16"))[-1].startswith("float16 on a CPU")
    assert dtype.tradeoffs_for(facts(llama, "A10G"), Setup(dtype="float32")) == []
    # a technique without its own rule lists all of its trade-offs
    kv = REGISTRY["kv-quantized"]
    assert kv.tradeoffs_for(facts(llama, "A10G"), Setup()) == list(kv.tradeoffs)
