"""Host RAM while `from_pretrained` loads a checkpoint, per loading path and version: what the estimate of the
running model (estimate/memory.py) does not hold.

    resident   the model built on the CPU before it moves: the whole model in its dtype when transformers
               instantiates it there (before META_INIT without device_map or a quantization config, which turn
               on low_cpu_mem_usage); nothing when it is built on the meta device. A CPU target: its weights.
    transient  a `.bin` shard that torch.load reads into memory whole (BIN_SHARD_BYTES when its size is unknown:
               save_pretrained's old default max_shard_size); nothing for safetensors (mmapped: file-backed pages the
               kernel can drop) nor for a .bin that torch.load maps (transformers >= BIN_MMAP with torch >= 2.1).

A dtype conversion happens tensor by tensor as each is placed, so the device never holds the whole checkpoint
twice: only the old CPU path (a model built on the CPU and a .bin state dict read whole) holds two copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infertune.probe.model import ModelProfile

GiB = 2**30
# transformers builds every model on the meta device and loads tensor by tensor (low_cpu_mem_usage always on) from
# 4.51 (PR 36963, "Remove low_cpu_mem_usage and _fast_init"); before, only with device_map or a quantization config
META_INIT = (4, 51, 0)
# load_state_dict passes mmap=True to torch.load for zip-format .bin files from 4.38 (with torch >= 2.1)
BIN_MMAP = (4, 38, 0)
TORCH_MMAP = (2, 1, 0)
BIN_SHARD_BYTES = 10 * 10**9  # save_pretrained's max_shard_size default before 4.36 ("10GB")


@dataclass
class HostLoad:
    bytes: int  # host RAM the load needs at its peak
    resident: int
    transient: int
    why: str  # the loading path, in words


def largest_bin_shard(p: ModelProfile) -> int:
    """The largest .bin file in the model's folder; BIN_SHARD_BYTES (or the whole checkpoint, if smaller) when the
    folder does not hold them (a hub model fetched without its weights)."""
    sizes = [f.stat().st_size for f in Path(p.path).glob("*.bin")] if p.path else []
    return max(sizes) if sizes else min(p.checkpoint_bytes or BIN_SHARD_BYTES, BIN_SHARD_BYTES)


def host_ram_at_load(
    p: ModelProfile,
    weights_bytes: int,
    on_cpu: bool,
    transformers: tuple[int, ...] | None,
    torch: tuple[int, ...] | None,
    device_map: bool,
    quantized: bool,
    fmt: str | None = None,
) -> HostLoad:
    """`weights_bytes`: the model in its dtype; `on_cpu`: the model runs from RAM (a CPU target); versions None:
    unknown (then today's loading path); `device_map`: device_map or low_cpu_mem_usage=True (built on the meta
    device); `fmt`: the format read (default: the checkpoint's)."""
    meta = transformers is None or transformers >= META_INIT or device_map or quantized
    resident = weights_bytes if on_cpu or not meta else 0
    mapped = transformers is not None and transformers >= BIN_MMAP and (torch is None or torch >= TORCH_MMAP)
    mapped = mapped or transformers is None
    fmt = fmt or p.checkpoint_format
    transient = largest_bin_shard(p) if fmt == "pytorch" and not mapped else 0
    fmt = {"pytorch": ".bin shards", "safetensors": "safetensors", "gguf": "GGUF"}.get(fmt or "", "weights")
    parts = []
    if resident:
        parts.append(
            f"the model built on the CPU in its dtype ({resident / GiB:.2f} GiB)"
            + ("" if on_cpu else ": transformers before 4.51 without device_map or low_cpu_mem_usage")
        )
    if transient:
        parts.append(f"torch.load reads a .bin shard whole ({transient / GiB:.2f} GiB)")
    why = f"{fmt}: " + (" + ".join(parts) if parts else "read tensor by tensor from mapped files")
    return HostLoad(bytes=resident + transient, resident=resident, transient=transient, why=why)
