"""device_map="auto" placement: accelerate's sequential weight fill, then each device's run-time state."""

import pytest

from infertune.core.errors import UserError
from infertune.estimate import estimate
from infertune.estimate.accelerators import find_accelerator
from infertune.estimate.memory import CUDA_ALLOCATOR_SLACK, CUDA_CONTEXT_BYTES, EstimateSettings
from infertune.estimate.placement import DEFAULT_GPU_BUDGET, parse_max_memory
from infertune.estimate.speed import DISK_OFFLOAD_Bps, HOST_LINK_Bps
from tests.estimate.test_estimate import llama

MiB, GiB = 2**20, 2**30
EMBED = 49152 * 576 * 2  # bf16, tied: the lm_head adds nothing
LAYER = (106_168_320 + 35_136) * 2 / 30  # every other weight, spread evenly over the 30 decoder layers


def test_parse_max_memory():
    assert parse_max_memory("0=20GiB,1=512MiB,cpu=64GB") == {"cuda:0": 20 * GiB, "cuda:1": 512 * MiB, "cpu": 64 * 10**9}
    assert parse_max_memory({"0": "1GiB", "cpu": "2GiB"}) == {"cuda:0": GiB, "cpu": 2 * GiB}
    assert parse_max_memory(None) is None
    assert parse_max_memory("cpu=1048576") == {"cpu": MiB}  # plain bytes
    with pytest.raises(UserError, match="unknown device 'gpu0'"):
        parse_max_memory("gpu0=20GiB")
    with pytest.raises(UserError, match="cannot read the size 'lots'"):
        parse_max_memory("0=lots")


def test_layers_fill_the_gpu_budget_in_order_and_the_rest_is_offloaded():
    s = EstimateSettings(dtype="bfloat16", input_len=1024, max_new_tokens=128)
    # room for the embedding, 10 whole layers and the one accelerate keeps free on GPU 0 (so that an
    # offloaded layer can be brought back)
    budget = int(EMBED + 11.5 * LAYER)
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
    off = estimate(llama(), s, acc, max_memory={"cuda:0": int(EMBED + 11.5 * LAYER), "cpu": 4 * GiB})
    copy = off.placement.offloaded_weights_bytes / HOST_LINK_Bps
    assert off.speed.tpot_s == pytest.approx(resident.speed.tpot_s + copy)
    assert off.speed.limited_by == "host-link"
    assert any("offloaded" in a for a in off.assumptions)


def test_a_budget_of_the_whole_card_fits_the_weights_but_not_the_generation():
    # 8k-token sequences x 32: 32 x 8.2k tokens x 23 KB of KV = 6.1 GB, beside 0.25 GB of weights, on a 6 GiB card.
    acc = find_accelerator("L4").model_copy(update={"memory_bytes": 6 * GiB})
    s = EstimateSettings(dtype="bfloat16", input_len=8192 - 64, max_new_tokens=64, concurrency=32)
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
    # GPU 0 keeps one layer's room free (it would take back an offloaded layer), so it holds 14, not 15
    assert (a.layers, b.layers) == (14, 16) and e.placement.offloaded_layers == 0
    assert a.kv_cache_bytes == int(e.memory.kv_cache_bytes * 14 / 30)
    assert b.kv_cache_bytes == int(e.memory.kv_cache_bytes * 16 / 30)
    assert a.overhead_bytes > CUDA_CONTEXT_BYTES and b.overhead_bytes > CUDA_CONTEXT_BYTES


def test_weights_beyond_every_budget_go_to_disk_and_are_read_back_every_step():
    acc = find_accelerator("T4")
    s = EstimateSettings(dtype="bfloat16")
    e = estimate(llama(), s, acc, max_memory={"cuda:0": 100 * MiB, "cpu": 50 * MiB})
    layers = e.placement.layers_by_device()
    assert sum(layers.values()) == 30 and layers["disk"] > 0
    disk = next(d for d in e.placement.devices if d.device == "disk")
    assert e.placement.disk_weights_bytes == disk.weights_bytes == int(layers["disk"] * LAYER)
    assert e.speed.limited_by == "disk" and any("offload_folder" in a for a in e.assumptions)
    assert "disk" not in e.fits or e.fits["disk"]  # the disk is not checked against the card
    resident = estimate(llama(), s, acc)
    cpu_bytes = e.placement.offloaded_weights_bytes - e.placement.disk_weights_bytes
    assert e.speed.tpot_s == pytest.approx(
        resident.speed.tpot_s + cpu_bytes / HOST_LINK_Bps + disk.weights_bytes / DISK_OFFLOAD_Bps
    )


def test_without_budgets_one_gpu_gets_ninety_percent():
    acc = find_accelerator("T4").model_copy(update={"memory_bytes": int(EMBED + 12.5 * LAYER)})
    from infertune.estimate.memory import estimate_memory
    from infertune.estimate.placement import place

    mem = estimate_memory(llama(), EstimateSettings(dtype="bfloat16"))
    pl = place(llama(), mem, 2, 1, acc.memory_bytes, None)
    budget = DEFAULT_GPU_BUDGET * acc.memory_bytes
    on_gpu = pl.layers_by_device()["cuda:0"]
    assert EMBED + (on_gpu + 1) * LAYER <= budget < EMBED + (on_gpu + 2) * LAYER  # one layer's room kept free


def _transformers_layers(folder, dtype, max_memory) -> dict[str, int]:
    """Decoder layers per device in transformers' own device_map="auto" for these budgets (meta model)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.integrations.accelerate import _get_device_map

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=dtype)
    dm = _get_device_map(
        model, "auto", {(int(k[5:]) if k.startswith("cuda:") else k): v for k, v in max_memory.items()}, None
    )
    n = model.config.num_hidden_layers
    if "model" in dm or "" in dm:  # the whole model on one device
        d = dm.get("model", dm.get(""))
        return {f"cuda:{d}" if isinstance(d, int) else str(d): n}
    out: dict[str, int] = {}
    for i in range(n):
        d = dm[f"model.layers.{i}"]
        d = f"cuda:{d}" if isinstance(d, int) else str(d)
        out[d] = out.get(d, 0) + 1
    return out


@pytest.mark.parametrize(
    "budgets",
    [
        {"cpu": 0.30},  # a host without GPUs: RAM, then disk
        {"cuda:0": 0.45, "cpu": 0.30},  # GPU, CPU RAM, disk
        {"cuda:0": 0.60, "cuda:1": 0.60},  # two GPUs: "auto" balances them
        {"cuda:0": 0.30, "cuda:1": 0.30, "cpu": 0.25},
        {"cuda:0": 2.0},  # everything fits
    ],
    ids=["cpu-disk", "gpu-cpu-disk", "two-gpus", "two-gpus-cpu-disk", "fits"],
)
@pytest.mark.parametrize("tied", [True, False])
def test_placement_replays_transformers_device_map_auto(tmp_path, budgets, tied):
    """The estimator's placement puts as many decoder layers on each device as transformers itself does,
    for budgets given as shares of the model's weights (reservations and balancing included)."""
    import json

    from infertune.probe.model import profile_model
    from tests.conftest import build_tiny_model

    folder = build_tiny_model(tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(tie_word_embeddings=tied, num_hidden_layers=12)
    (folder / "config.json").write_text(json.dumps(cfg))
    prof = profile_model(folder)
    s = EstimateSettings(dtype="float32", input_len=16, max_new_tokens=4)
    weights = estimate(prof, s, find_accelerator("L4")).memory.weights_bytes
    max_memory = {d: int(share * weights) for d, share in budgets.items()}
    gpus = sum(d.startswith("cuda") for d in budgets)
    s = s.model_copy(update={"platform": "cuda" if gpus else "cpu"})
    e = estimate(prof, s, find_accelerator("L4"), gpus=max(gpus, 1), max_memory=max_memory)
    assert e.placement.layers_by_device() == _transformers_layers(folder, "float32", max_memory)


def test_estimate_on_a_host_without_gpus_places_layers_in_ram_then_on_disk(tiny_model):
    from infertune import api

    e = api.estimate(model=str(tiny_model), dtype="float32", max_memory="cpu=1", input_len=16, max_new_tokens=4)
    assert e.settings.platform == "cpu" and e.placement.compute_device == "cpu"
    assert e.placement.layers_by_device() == {"disk": 2}  # one byte of RAM holds no layer
    cpu = next(d for d in e.placement.devices if d.device == "cpu")
    assert cpu.kv_cache_bytes == e.memory.kv_cache_bytes  # the layers compute here: their KV is here
    assert e.speed.limited_by == "disk" and set(e.fits) == {"cpu", "disk"}
    with pytest.raises(UserError, match="names GPUs but none is detected"):
        api.estimate(model=str(tiny_model), max_memory="0=1GiB")
    with pytest.raises(UserError, match="gives no GPU a budget"):
        api.estimate(model=str(tiny_model), gpu="L4", max_memory="cpu=1GiB")
