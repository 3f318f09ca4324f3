"""Accelerator facts from vendor datasheets: memory, bandwidth, dense peak FLOP/s per dtype, capabilities.

Only datasheet figures live here (dense, no sparsity; for GeForce cards the FP32-accumulate tensor
figure, which is what PyTorch matmuls use). Nothing here is a measured speed: measured numbers come
from trials on the user's own stack. The CPU entry is probed on the host (see `probe_cpu`).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
from typing import Literal

from pydantic import BaseModel

from infertune.core.errors import UserError
from infertune.estimate.gpus import Datasheet, datasheets
from infertune.estimate.rates import Calibration

TB = 1e12
GiB = 2**30
GB = 1e9


class Accelerator(BaseModel):
    name: str
    vendor: str
    memory_bytes: int
    bandwidth_Bps: float  # memory bandwidth, bytes/s
    flops: dict[str, float]  # dense peak FLOP/s by compute dtype: float32, bfloat16, float16, fp8, int8
    bf16: bool
    fp8: bool
    flash_attn_2: bool
    flash_attn_3: bool
    interconnect: str
    interconnect_Bps: float  # per-GPU bandwidth to its peers (NVLink/Infinity Fabric, else PCIe)
    compute_capability: str | None = None  # NVIDIA only: FlashAttention-2 needs >= 8.0, FA3 9.0
    source: str = "datasheet"
    aliases: tuple[str, ...] = ()
    calibration: Calibration | None = None  # this host measured (estimate/calibration.py): expected speed uses it
    # a stated CPU target (estimate/cpus.py): its ISA flags as /proc/cpuinfo spells them, and its cores
    cpu_flags: list[str] | None = None
    cores: int | None = None

    @property
    def platform(self) -> Literal["cuda", "cpu", "mps"]:
        """cpu (this host's probed CPU, or a stated one), mps (Apple) or cuda."""
        if self.vendor == "host" or self.cpu_flags is not None:
            return "cpu"
        return "mps" if self.vendor == "Apple" else "cuda"


def _gpu(d: Datasheet) -> Accelerator:
    flops = {"float32": d.fp32 * TB, "bfloat16": d.bf16 * TB, "float16": (d.fp16 or d.bf16) * TB}
    if d.fp8:
        flops["fp8"] = d.fp8 * TB
    if d.int8:
        flops["int8"] = d.int8 * TB
    return Accelerator(
        name=d.name,
        vendor=d.vendor,
        memory_bytes=int(d.mem_gb * (GiB if d.mem_gib else GB)),
        bandwidth_Bps=d.bw_tbs * TB,
        flops=flops,
        bf16=d.cc_bf16,
        fp8=d.fp8 is not None,
        flash_attn_2=d.fa2,
        flash_attn_3=d.fa3,
        interconnect=d.link,
        interconnect_Bps=d.link_gbs * GB,
        aliases=d.aliases,
        compute_capability=d.cc,
        source=f"datasheet: {d.source}",
    )


ACCELERATORS: list[Accelerator] = [_gpu(d) for d in datasheets()]


def _norm(s: str) -> str:
    s = s.lower().replace("nvidia", "").replace("geforce", "")
    return re.sub(r"[^a-z0-9]+", "", s)


def _names() -> dict[str, Accelerator]:
    names: dict[str, Accelerator] = {}
    for acc in ACCELERATORS:
        for alias in (acc.name, *acc.aliases):
            names.setdefault(_norm(alias), acc)
    return names


def find_accelerator(name: str) -> Accelerator:
    """Look up a GPU by its name or an alias, forgiving case, spaces and vendor prefixes, and nothing else: a name
    that is not exactly a card's (`H20` is not the `H200`, `A100` is two cards) is refused with the candidates."""
    key, names = _norm(name), _names()
    if key in names:
        return names[key]
    starting = {acc.name: acc for alias, acc in names.items() if key and alias.startswith(key)}
    if len(starting) > 1:  # 'A100': the 40 GB and the 80 GB card; which one decides whether a model fits
        from infertune.core.validate import one_of

        return one_of("gpu", name, starting, "GPU")  # refuses, listing them
    close = list(starting) or difflib.get_close_matches(name, [a.name for a in ACCELERATORS], n=3, cutoff=0.3)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UserError(
        f"unknown GPU {name!r}{hint} (a name must be a card's or one of its aliases; known: "
        f"{', '.join(a.name for a in ACCELERATORS)}; --vram sets another memory size of a listed card)"
    )


def detected_accelerator(gpu_name: str) -> Accelerator:
    """The table entry for a name a driver reports ('NVIDIA H100 80GB HBM3', 'Tesla V100-SXM2-16GB'): exactly, else
    the longest table name or alias the reported name starts with ('tesla v100 sxm2 16gb' starts with 'tesla v100')."""
    key, names = _norm(gpu_name), _names()
    if key in names:
        return names[key]
    starts = [alias for alias in names if alias and key.startswith(alias)]
    if not starts:
        return find_accelerator(gpu_name)  # refused, with the candidates
    return names[max(starts, key=len)]


def from_detected_gpu(gpu_name: str, total_memory_bytes: int, calibrate: bool = False) -> Accelerator:
    """The table entry for a detected card, with the card's own memory size (variants differ); `calibrate`:
    attach this host's CUDA calibration (measured once, cached; creates a CUDA context in this process)."""
    from infertune.estimate import calibration

    acc = detected_accelerator(gpu_name)
    cal = calibration.cached("cuda") if calibrate else None
    return acc.model_copy(update={"memory_bytes": total_memory_bytes, "calibration": cal})


def _probe_key() -> str:
    """This host's CPU and the torch that measured it: a cached probe answers for them."""
    from importlib.metadata import PackageNotFoundError, version

    from infertune.probe.hardware import _cpu_model, total_ram_bytes

    try:
        torch_v = version("torch")
    except PackageNotFoundError:
        torch_v = "?"
    return f"{_cpu_model()}|{os.cpu_count()}|{total_ram_bytes()}|torch {torch_v}"  # os.cpu_count: psutil's count


def probe_cpu(seconds: float = 0.5, cached: bool = True, calibrate: bool = True, say=None) -> Accelerator:
    """This host's CPU as an 'accelerator', measured once per CPU and torch version and kept in
    INFERTUNE_HOME/cpu-probe.json (a later estimate reads it without importing torch; delete the file
    to measure again); with `calibrate`, its cached calibration (measured once: per-step overhead, F.linear
    speed per dtype and rows). `say` hears of each measurement as it starts (a cached answer says nothing)."""
    import json

    from infertune.core.paths import home, write_json_atomic
    from infertune.estimate import calibration

    file, key = home() / "cpu-probe.json", _probe_key()
    acc = None
    if cached:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            # a probe without its load was taken by an older infertune from mean rates (noise-prone): probed again
            if data.get("key") == key and "load_per_core" in data:
                acc = Accelerator(**data["accelerator"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if acc is None:
        if say:
            say("probing this CPU's bandwidth and FLOP/s")
        load = calibration.load_per_core()  # before our own threads add to it
        acc = measure_cpu(seconds)
        with contextlib.suppress(OSError):  # a read-only home: probed again next time
            write_json_atomic(file, {"key": key, "load_per_core": load, "accelerator": acc.model_dump(mode="json")})
    return acc.model_copy(update={"calibration": calibration.cached("cpu", say=say) if calibrate else None})


def measure_cpu(seconds: float = 0.5) -> Accelerator:
    """This host's CPU as an 'accelerator': memory bandwidth (large copy) and matmul FLOP/s, measured."""
    import psutil
    import torch

    from infertune.estimate.microbench import time_calls  # fastest of repeated calls: contention only adds time

    n = 64 * 2**20 // 4  # 64 MiB of float32: well beyond the caches
    a, b = torch.ones(n), torch.empty(n)
    bandwidth = 2 * a.numel() * 4 / time_calls(lambda: b.copy_(a), seconds / 2)  # read + write
    flops = {}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        # The shape models run (activations x weight^T via F.linear): on CPUs without native bf16, a
        # square bf16 matmul takes a path ~15x slower than this one, so the shape matters.
        x, w = torch.ones(128, 1024, dtype=dtype), torch.ones(2048, 1024, dtype=dtype)
        flops[str(dtype).removeprefix("torch.")] = (
            2 * 128 * 1024 * 2048 / time_calls(lambda x=x, w=w: torch.nn.functional.linear(x, w), seconds / 4)
        )
    return Accelerator(
        name="CPU",
        vendor="host",
        memory_bytes=psutil.virtual_memory().total,
        bandwidth_Bps=bandwidth,
        flops=flops,
        bf16=True,
        fp8=False,
        flash_attn_2=False,
        flash_attn_3=False,
        interconnect="host memory",
        interconnect_Bps=bandwidth,  # ranks on one host exchange through memory: its bandwidth bounds them
        source="measured on this host",
    )
