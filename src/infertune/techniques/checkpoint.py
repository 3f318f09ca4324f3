"""How the checkpoint is read: host RAM at load is a problem of the loading path, not of the running model.

A `.bin` shard is read whole by torch.load (before transformers mapped it), and transformers before 4.51 built the
whole model on the CPU unless device_map, low_cpu_mem_usage or a quantization config said otherwise
(estimate/loading.py has the arithmetic). The moves: read safetensors instead (mapped, never held whole: a revision
that ships them, or the .bin shards converted once), and build the model on the meta device
(low_cpu_mem_usage=True). The estimate of the running model does not change: these moves cure a problem the device
estimate has no term for, so they are offered only where the target's RAM is known and the load needs more.
"""

from __future__ import annotations

from infertune.estimate.loading import HostLoad, host_ram_at_load
from infertune.estimate.memory import DTYPE_BYTES
from infertune.techniques.base import HF, Check, Facts, Setup, Technique, register


def host_load(f: Facts, s: Setup, weights_bytes: int | None = None, overhead_bytes: int = 0) -> tuple[int, HostLoad]:
    """(host RAM the load needs, the loading path) for setup `s` on the target; `weights_bytes`: the model in its
    dtype (default: parameters x the dtype's bytes); a CPU target's runtime `overhead_bytes` counts beside it."""
    if weights_bytes is None:
        weights_bytes = (f.profile.num_parameters or 0) * DTYPE_BYTES.get(s.dtype, 2)
    on_cpu = f.platform == "cpu"
    load = host_ram_at_load(
        f.profile,
        weights_bytes,
        on_cpu,
        f.version("transformers"),
        f.version("torch"),
        s.device_map is not None or s.tp > 1 or s.low_cpu_mem_usage,
        s.quantization != "none",
        "safetensors" if s.checkpoint == "safetensors" else None,
    )
    return load.bytes + (overhead_bytes if on_cpu else 0), load


def short_of_ram(f: Facts, s: Setup) -> HostLoad | None:
    """The loading path when it needs more than the target's known RAM (a CPU target: only a shard beyond the
    weights, which its device check already holds); else None."""
    if not f.cpu_ram_bytes:
        return None
    need, load = host_load(f, s)
    if need <= f.cpu_ram_bytes or (f.platform == "cpu" and not load.transient):
        return None
    return load


@register
class CheckpointLoading(Technique):
    id = "checkpoint-loading"
    family = "loading"
    title = "Load through less host RAM: safetensors (mapped) and low_cpu_mem_usage=True (built on the meta device)"
    addresses = ("load-memory",)
    priority = 5
    cures_known_problem = True  # the device estimate is unchanged: it cures host RAM at load
    tradeoffs = (
        "safetensors: a one-off conversion where RAM allows (load, then save_pretrained(safe_serialization=True)), "
        "or a revision of the model that ships *.safetensors",
        "low_cpu_mem_usage=True needs accelerate; transformers >= 4.51 always loads this way",
    )
    docs = (HF + "main_classes/model#large-model-loading", "https://huggingface.co/docs/safetensors/index")

    def applied(self, s: Setup) -> bool:
        return s.checkpoint == "safetensors" and s.low_cpu_mem_usage

    def moves(self, f: Facts, s: Setup) -> list[Setup]:
        load = short_of_ram(f, s)
        if load is None:
            return []
        knobs: list[dict[str, object]] = []
        if load.transient and s.checkpoint != "safetensors":
            knobs.append({"checkpoint": "safetensors"})
        if load.resident and f.platform != "cpu" and not s.low_cpu_mem_usage:
            knobs.append({"low_cpu_mem_usage": True})
        if len(knobs) == 2:  # together, where neither alone is enough
            knobs.append({**knobs[0], **knobs[1]})
        out = [s.model_copy(update=k) for k in knobs]
        # the single moves that are enough alone; else both knobs (or the one there is): the least host RAM
        singles = [m for m in out[:2] if short_of_ram(f, m) is None]
        return singles or out[-1:]

    def check(self, f: Facts, s: Setup) -> Check:
        c = Check().need(short_of_ram(f, s) is not None, "the load fits the target's RAM (or the RAM is unknown)")
        return c.need_package(f, "accelerate")

    def apply(self, f: Facts, s: Setup) -> Setup:
        return (self.moves(f, s) or [s.model_copy(update={"checkpoint": "safetensors", "low_cpu_mem_usage": True})])[0]

    def note(self, before: Setup, after: Setup) -> str | None:
        if after.checkpoint != before.checkpoint:
            return "host RAM at load: safetensors are mapped tensor by tensor, a .bin shard is read whole"
        return "host RAM at load: built on the meta device, the model is never whole in host RAM"
