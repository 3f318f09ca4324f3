"""device_map="auto" placement: accelerate's sequential weight fill, then each device's run-time state."""

import pytest

from infertune.errors import UserError
from infertune.estimate import estimate
from infertune.estimate.accelerators import find_accelerator
from infertune.estimate.memory import CUDA_ALLOCATOR_SLACK, CUDA_CONTEXT_BYTES, EstimateSettings
from infertune.estimate.placement import DEFAULT_GPU_BUDGET, parse_max_memory
from infertune.estimate.speed import HOST_LINK_Bps
from tests.test_estimate import llama

MiB, GiB = 2**20, 2**30
EMBED = 49152 * 576 * 2  # bf16, tied: the lm_head adds nothing
LAYER = (106_168_320 + 35_136) * 2 / 30  # every other weight, spread evenly over the 30 decoder layers


def test_parse_max_memory():
    assert parse_max_memory("0=20GiB,1=512MiB,cpu=64GB") == {"cuda:0": 20 * GiB, "cuda:1": 512 * MiB,
                                                            "cpu": 64 * 10**9}
    assert parse_max_memory({"0": "1GiB", "cpu": "2GiB"}) == {"cuda:0": GiB, "cpu": 2 * GiB}
    assert parse_max_memory(None) is None
    with pytest.raises(UserError, match="unknown device 'gpu0'"):
        parse_max_memory("gpu0=20GiB")
    with pytest.raises(UserError, match="cannot read the size 'lots'"):
        parse_max_memory("0=lots")


def test_layers_fill_the_gpu_budget_in_order_and_the_rest_is_offloaded():
    s = EstimateSettings(dtype="bfloat16", input_len=1024, max_new_tokens=128)
    budget = int(EMBED + 10.5 * LAYER)  # room for the embedding and 10 whole layers
    e = estimate(llama(), s, find_accelerator("L4"), max_memory={"cuda:0": budget, "cpu": 4 * GiB})
    gpu, cpu = e.placement.devices
    assert (gpu.device, gpu.layers, cpu.device, cpu.layers) == ("cuda:0", 10, "cpu", 20)
    assert gpu.weights_bytes == int(EMBED + 10 * LAYER)
    assert e.placement.offloaded_layers == 20 and cpu.weights_bytes == int(20 * LAYER)
    # offloaded layers compute on cuda:0, so their KV cache is there too: all of it
    assert gpu.kv_cache_bytes == e.memory.kv_cache_bytes and cpu.kv_cache_bytes == 0
    tensors = gpu.weights_bytes + gpu.kv_cache_bytes + gpu.transient_bytes
    assert gpu.total_bytes == int(tensors + CUDA_CONTEXT_BYTES + CUDA_ALLOCATOR_SLACK * tensors)
    assert e.memory.per_device == {"cuda:0": gpu.total_bytes, "cpu": cpu.total_bytes}


def test_offloaded_weights_cross_the_host_link_every_step():
    s = EstimateSettings(dtype="bfloat16", input_len=1024, max_new_tokens=128)
    acc = find_accelerator("L4")
    resident = estimate(llama(), s, acc)
    off = estimate(llama(), s, acc, max_memory={"cuda:0": int(EMBED + 10.5 * LAYER), "cpu": 4 * GiB})
    copy = off.placement.offloaded_weights_bytes / HOST_LINK_Bps
    assert off.speed.tpot_s == pytest.approx(resident.speed.tpot_s + copy)
    assert off.speed.bound == "host-link"
    assert any("offloaded" in a for a in off.assumptions)


def test_a_budget_of_the_whole_card_fits_the_weights_but_not_the_generation():
    # 8k prompts x 32 sequences: 32 x 8.3k tokens x 23 KB of KV = 6.1 GB, beside 0.25 GB of weights, on a 6 GiB card.
    acc = find_accelerator("L4").model_copy(update={"memory_bytes": 6 * GiB})
    s = EstimateSettings(dtype="bfloat16", input_len=8192, max_new_tokens=64, concurrency=32)
    e = estimate(llama(), s, acc, max_memory={"cuda:0": 6 * GiB})
    (gpu,) = e.placement.devices
    assert gpu.layers == 30 and gpu.weights_bytes <= gpu.budget_bytes  # accelerate places it all
    assert e.fits == {"cuda:0": False}  # and generation runs out


def test_two_gpus_share_layers_and_each_pays_its_context():
    acc = find_accelerator("A10G")
    s = EstimateSettings(dtype="bfloat16", input_len=512, max_new_tokens=64)
    budget = int(EMBED + 15 * LAYER) + 1
    e = estimate(llama(), s, acc, gpus=2, max_memory={"cuda:0": budget, "cuda:1": budget})
    a, b = e.placement.devices
    assert (a.layers, b.layers) == (15, 15) and e.placement.offloaded_layers == 0
    assert a.kv_cache_bytes == b.kv_cache_bytes == e.memory.kv_cache_bytes // 2
    assert a.overhead_bytes > CUDA_CONTEXT_BYTES and b.overhead_bytes > CUDA_CONTEXT_BYTES


def test_default_budget_is_ninety_percent_and_weights_beyond_all_budgets_are_an_error():
    acc = find_accelerator("T4")
    s = EstimateSettings(dtype="bfloat16")
    with pytest.raises(UserError, match="do not fit the --max-memory budgets"):
        estimate(llama(), s, acc, max_memory={"cuda:0": 50 * MiB, "cpu": 50 * MiB})
    assert DEFAULT_GPU_BUDGET == 0.90
