"""Where device_map="auto" puts the model, and what each device then needs at run time.

accelerate places *weights only*, module by module in order (embedding, decoder layers, final norm and
lm_head), filling each device up to its `max_memory` budget before the next: GPUs in index order, then
CPU RAM (offloaded weights, streamed to the GPU at every forward), then disk. It knows nothing of the KV
cache or activations: they land on the GPUs at run time, on top of the weights. So a budget set to the
whole card fits at load and runs out at generation; that is what this module shows.
"""

from __future__ import annotations

from pydantic import BaseModel

from infertune.core.errors import UserError
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
    compute_device: str  # where offloaded layers run: cuda:0, or cpu on a host without GPUs
    devices: list[DeviceShare]
    offloaded_layers: int  # layers whose weights live off the compute devices (streamed each step)
    offloaded_weights_bytes: int  # all weights streamed each forward: from CPU RAM and from disk
    disk_weights_bytes: int = 0  # the part read back from the offload folder (needs offload_folder)

    def layers_by_device(self) -> dict[str, int]:
        return {d.device: d.layers for d in self.devices if d.layers}


def parse_max_memory(text: str | dict | None) -> dict[str, int] | None:
    """'0=20GiB,1=20GiB,cpu=64GiB' (or a dict from a run file) -> {'cuda:0': bytes, ..., 'cpu': bytes}."""
    if not text:
        return None
    from accelerate.utils import convert_file_size_to_int

    items = (
        text.items()
        if isinstance(text, dict)
        else (part.split("=", 1) if "=" in part else (part, "") for part in str(text).split(","))
    )
    out: dict[str, int] = {}
    for key, size in items:
        key = str(key).strip().lower()
        dev = f"cuda:{key}" if key.isdigit() else key
        if not (dev in ("cpu", "disk", "mps") or (dev.startswith("cuda:") and dev[5:].isdigit())):
            raise UserError(f"--max-memory: unknown device {key!r}; use GPU indices (0, 1, ...), cpu or disk")
        size = str(size).strip()
        try:
            out[dev] = int(size) if size.isdigit() else int(convert_file_size_to_int(size))
        except ValueError:
            raise UserError(f"--max-memory: cannot read the size {size!r} for {key}; e.g. 0=20GiB,cpu=64GiB") from None
    return out


def _budgets(gpus: int, gpu_capacity: int, max_memory: dict[str, int] | None) -> dict[str, float]:
    """Each device's weight budget, in accelerate's device order (GPUs, cpu, then disk, unbounded).
    Given budgets are taken as they are (a device left out gets nothing); without any, one GPU gets
    90 % of its memory, several GPUs all of it, and CPU RAM is unbounded here (the host's is not known)."""
    if max_memory:
        if gpus and not any(d.startswith("cuda:") for d in max_memory):
            raise UserError("--max-memory gives no GPU a budget; name them by index: 0=20GiB")
        named = {d: float(b) for d, b in max_memory.items() if d.startswith("cuda:") and int(d[5:]) < gpus}
        budgets = dict(sorted(named.items(), key=lambda kv: int(kv[0][5:])))
        budgets.update({d: float(max_memory[d]) for d in ("cpu", "disk") if d in max_memory})
    else:
        share = DEFAULT_GPU_BUDGET if gpus == 1 else 1.0
        budgets = {f"cuda:{i}": gpu_capacity * share for i in range(gpus)}
        budgets["cpu"] = float("inf")
    budgets["disk"] = float("inf")  # accelerate always ends with the disk: nothing is ever left unplaced
    return budgets


def place(
    p: ModelProfile,
    mem: MemoryEstimate,
    dtype_bytes: int,
    gpus: int,
    gpu_capacity: int,
    max_memory: dict[str, int] | None,
) -> Placement:
    """Replay transformers' device_map="auto" (integrations/accelerate.py: get_balanced_memory, then
    infer_auto_device_map) on the estimator's weight sizes, then add each device's run-time state.

    The weights, module by module in order (embedding, decoder layers, lm_head), fill each device before
    the next. Three rules matter: with several GPUs "auto" balances them (every GPU but the last is capped
    at total/N plus 1.25 x the largest module); the main devices (GPU 0, or the CPU without GPUs, and
    the CPU) keep room for the largest module still to place, so a layer offloaded later can be brought
    back; and whatever fits nowhere goes to disk. KV cache and attention belong to the device that
    computes a layer: the layer's GPU, or the compute device (cuda:0, cpu) for offloaded layers. Prefill
    transients and logits are counted on every GPU that computes (conservative: they do not all peak at
    once)."""
    compute = "cuda:0" if gpus else "cpu"

    def streamed(d: str) -> bool:  # weights that live off the devices that compute: brought back each forward
        return d != compute and not d.startswith("cuda")

    budgets = _budgets(gpus, gpu_capacity, max_memory)
    embed = (p.param_groups or {}).get("embedding", p.vocab_size * p.hidden_size) * dtype_bytes
    head = 0 if p.tie_word_embeddings else p.vocab_size * p.hidden_size * dtype_bytes
    layer_w = max(mem.weights_bytes - embed - head, 0) / p.num_layers
    modules = [("embedding", embed)] + [("layer", layer_w)] * p.num_layers + [("lm_head", head)]

    gpu_devs = [d for d in budgets if d.startswith("cuda:")]
    if len(gpu_devs) > 1:  # get_balanced_memory
        per_gpu = mem.weights_bytes // len(gpu_devs) + int(1.25 * max(layer_w, embed, head))
        for d in gpu_devs[:-1]:
            budgets[d] = min(budgets[d], per_gpu)
    main = {gpu_devs[0], "cpu"} if gpu_devs else {"cpu"}

    order = list(budgets)
    placed: dict[str, dict] = {d: {"layers": 0, "weights": 0.0} for d in order}
    di = 0
    for i, (kind, size) in enumerate(modules):
        reserve = max((s for _, s in modules[i + 1 :]), default=0)
        while placed[order[di]]["weights"] + size > budgets[order[di]] - (reserve if order[di] in main else 0):
            di += 1  # the disk is unbounded: this ends
        placed[order[di]]["weights"] += size
        placed[order[di]]["layers"] += kind == "layer"

    kv_per_layer = mem.kv_cache_bytes / p.num_layers
    transient = max(mem.total_bytes - mem.overhead_bytes - mem.weights_bytes - mem.kv_cache_bytes, 0)  # + state
    offloaded = sum(placed[d]["layers"] for d in order if streamed(d))
    shares = []
    for d in order:
        layers = placed[d]["layers"]
        computes = d == compute or (d.startswith("cuda") and layers > 0)
        if not computes and not placed[d]["weights"]:
            continue
        kv = kv_per_layer * (layers + (offloaded if d == compute else 0)) if computes else 0
        extra = transient if computes else 0
        w = placed[d]["weights"]
        if d.startswith("cuda"):
            over = (mem.cuda_context_bytes or CUDA_CONTEXT_BYTES) + CUDA_ALLOCATOR_SLACK * (w + kv + extra)
        else:  # the host process: its runtime when it computes, nothing extra when it only holds weights
            over = mem.overhead_bytes if computes else 0
        shares.append(
            DeviceShare(
                device=d,
                budget_bytes=None if budgets[d] == float("inf") else int(budgets[d]),
                layers=layers,
                weights_bytes=int(w),
                kv_cache_bytes=int(kv),
                transient_bytes=int(extra),
                overhead_bytes=int(over),
                total_bytes=int(w + kv + extra + over),
            )
        )
    off = [s for s in shares if streamed(s.device)]
    return Placement(
        compute_device=compute,
        devices=shares,
        offloaded_layers=offloaded,
        offloaded_weights_bytes=sum(s.weights_bytes for s in off),
        disk_weights_bytes=sum(s.weights_bytes for s in off if s.device == "disk"),
    )
