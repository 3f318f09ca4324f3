"""Where device_map="auto" puts the model, and what each device then needs at run time.

accelerate places *weights only*, module by module in order (embedding, decoder layers, final norm and
lm_head), filling each device up to its `max_memory` budget before the next: GPUs in index order, then
CPU RAM (offloaded weights, streamed to the GPU at every forward), then disk. It knows nothing of the KV
cache or activations: they land on the GPUs at run time, on top of the weights. So a budget set to the
whole card fits at load and runs out at generation; that is what this module shows.
"""

from __future__ import annotations

from pydantic import BaseModel

from infertune.errors import UserError
from infertune.estimate.memory import CUDA_ALLOCATOR_SLACK, CUDA_CONTEXT_BYTES, MemoryEstimate
from infertune.probe.model import ModelProfile

DEFAULT_GPU_BUDGET = 0.90  # transformers' default max_memory for device_map="auto": 90 % of each GPU


class DeviceShare(BaseModel):
    device: str  # cuda:0 ... / cpu / disk
    budget_bytes: int | None  # the max_memory weights were placed against (None: unbounded)
    layers: int  # decoder layers whose weights live here
    weights_bytes: int
    kv_cache_bytes: int
    transient_bytes: int  # prefill scratch/activations and logits on the devices that compute
    overhead_bytes: int
    total_bytes: int


class Placement(BaseModel):
    devices: list[DeviceShare]
    offloaded_layers: int  # layers whose weights live in CPU RAM or on disk (streamed each step)
    offloaded_weights_bytes: int


def parse_max_memory(text: str | dict | None) -> dict[str, int] | None:
    """'0=20GiB,1=20GiB,cpu=64GiB' (or a dict from a run file) -> {'cuda:0': bytes, ..., 'cpu': bytes}."""
    from accelerate.utils import convert_file_size_to_int

    if not text:
        return None
    items = text.items() if isinstance(text, dict) else (
        part.split("=", 1) if "=" in part else (part, "") for part in str(text).split(","))
    out: dict[str, int] = {}
    for key, size in items:
        key = str(key).strip().lower()
        dev = f"cuda:{key}" if key.isdigit() else key
        if not (dev in ("cpu", "disk", "mps") or (dev.startswith("cuda:") and dev[5:].isdigit())):
            raise UserError(f"--max-memory: unknown device {key!r}; use GPU indices (0, 1, ...), cpu or disk")
        try:
            out[dev] = int(convert_file_size_to_int(str(size).strip()))
        except ValueError:
            raise UserError(f"--max-memory: cannot read the size {size!r} for {key}; e.g. 0=20GiB,cpu=64GiB") from None
    return out


def place(p: ModelProfile, mem: MemoryEstimate, dtype_bytes: int, gpus: int, gpu_capacity: int,
          max_memory: dict[str, int] | None) -> Placement:
    """Simulate accelerate's sequential fill, then add each device's run-time state.

    KV cache and attention belong to the device that computes a layer: the layer's GPU, or cuda:0 (the
    execution device) for layers offloaded to CPU or disk. Prefill transients and logits are counted on
    every GPU that computes (conservative: they do not all peak at once)."""
    budgets = {f"cuda:{i}": int(gpu_capacity * DEFAULT_GPU_BUDGET) for i in range(gpus)}
    if max_memory:
        budgets = {d: max_memory[d] for d in budgets if d in max_memory}
        if not budgets:
            raise UserError("--max-memory gives no GPU a budget; name them by index: 0=20GiB")
        budgets.update({d: b for d, b in max_memory.items() if d in ("cpu", "disk")})
    else:
        budgets["cpu"] = 1 << 62  # no cap given: whatever does not fit the GPUs is offloaded to RAM
    embed = (p.param_groups or {}).get("embedding", p.vocab_size * p.hidden_size) * dtype_bytes
    head = 0 if p.tie_word_embeddings else p.vocab_size * p.hidden_size * dtype_bytes
    layer_w = max(mem.weights_bytes - embed - head, 0) / p.num_layers
    modules = [("embedding", embed)] + [("layer", layer_w)] * p.num_layers + [("lm_head", head)]

    order = list(budgets)
    placed: dict[str, dict] = {d: {"layers": 0, "weights": 0.0} for d in order}
    di = 0
    for kind, size in modules:
        while di < len(order) and placed[order[di]]["weights"] + size > budgets[order[di]]:
            di += 1
        if di == len(order):
            raise UserError(f"the weights ({mem.weights_bytes / 2**30:.1f} GiB) do not fit the --max-memory "
                            f"budgets ({sum(budgets.values()) / 2**30:.1f} GiB in all)")
        placed[order[di]]["weights"] += size
        placed[order[di]]["layers"] += kind == "layer"

    kv_per_layer = mem.kv_cache_bytes / p.num_layers
    transient = max(mem.total_bytes - mem.overhead_bytes - mem.weights_bytes - mem.kv_cache_bytes, 0)
    offloaded = sum(placed[d]["layers"] for d in order if not d.startswith("cuda"))
    shares = []
    for d in order:
        gpu = d.startswith("cuda")
        layers = placed[d]["layers"]
        if not gpu and not layers and not placed[d]["weights"]:
            continue
        kv = kv_per_layer * (layers + (offloaded if d == "cuda:0" else 0)) if gpu else 0
        computes = gpu and (layers or d == "cuda:0")
        extra = transient if computes else 0
        over = CUDA_CONTEXT_BYTES + CUDA_ALLOCATOR_SLACK * (placed[d]["weights"] + kv + extra) if gpu else 0
        shares.append(DeviceShare(
            device=d, budget_bytes=budgets[d] if budgets[d] < 1 << 62 else None, layers=layers,
            weights_bytes=int(placed[d]["weights"]), kv_cache_bytes=int(kv), transient_bytes=int(extra),
            overhead_bytes=int(over), total_bytes=int(placed[d]["weights"] + kv + extra + over),
        ))
    off_w = sum(s.weights_bytes for s in shares if not s.device.startswith("cuda"))
    return Placement(devices=shares, offloaded_layers=offloaded, offloaded_weights_bytes=off_w)
