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


def _gpu(
    name,
    vendor,
    mem_gb,
    bw_tbs,
    fp32,
    bf16,
    fp16=None,
    fp8=None,
    int8=None,
    *,
    cc=None,
    cc_bf16=True,
    fa2=True,
    fa3=False,
    link="PCIe 4.0 x16",
    link_gbs=32.0,
    aliases=(),
    mem_gib=False,
) -> Accelerator:
    flops = {"float32": fp32 * TB, "bfloat16": bf16 * TB, "float16": (fp16 or bf16) * TB}
    if fp8:
        flops["fp8"] = fp8 * TB
    if int8:
        flops["int8"] = int8 * TB
    return Accelerator(
        name=name,
        vendor=vendor,
        memory_bytes=int(mem_gb * (GiB if mem_gib else GB)),
        bandwidth_Bps=bw_tbs * TB,
        flops=flops,
        bf16=cc_bf16,
        fp8=fp8 is not None,
        flash_attn_2=fa2,
        flash_attn_3=fa3,
        interconnect=link,
        interconnect_Bps=link_gbs * GB,
        aliases=aliases,
        compute_capability=cc,
    )


ACCELERATORS: list[Accelerator] = [
    _gpu(
        "H200",
        "NVIDIA",
        141,
        4.8,
        67,
        989,
        fp8=1979,
        int8=1979,
        fa3=True,
        link="NVLink 4",
        link_gbs=900,
        cc="9.0",
        aliases=("h200 sxm", "gh200"),
    ),
    _gpu(
        "H100 SXM",
        "NVIDIA",
        80,
        3.35,
        67,
        989,
        fp8=1979,
        int8=1979,
        fa3=True,
        link="NVLink 4",
        link_gbs=900,
        cc="9.0",
        aliases=("h100 sxm5", "h100 80gb hbm3"),
    ),
    _gpu(
        "H100 PCIe",
        "NVIDIA",
        80,
        2.0,
        51,
        756,
        fp8=1513,
        int8=1513,
        fa3=True,
        link="PCIe 5.0 x16",
        link_gbs=64,
        cc="9.0",
        aliases=("h100 pcie 80gb",),
    ),
    _gpu(
        "A100 80GB",
        "NVIDIA",
        80,
        2.039,
        19.5,
        312,
        int8=624,
        link="NVLink 3",
        link_gbs=600,
        cc="8.0",
        aliases=("a100 sxm4 80gb", "a100-80gb", "a100 80gb pcie"),
    ),
    _gpu(
        "A100 40GB",
        "NVIDIA",
        40,
        1.555,
        19.5,
        312,
        int8=624,
        link="NVLink 3",
        link_gbs=600,
        cc="8.0",
        aliases=("a100 sxm4 40gb", "a100-40gb", "a100 pcie 40gb"),
    ),
    _gpu("L40S", "NVIDIA", 48, 0.864, 91.6, 362, fp8=733, int8=733, cc="8.9", aliases=("l40s",)),
    _gpu("L4", "NVIDIA", 24, 0.300, 30.3, 121, fp8=242, int8=242, cc="8.9", aliases=("l4",)),
    # NVIDIA publishes A10 figures; AWS's A10G is the same GA102 chip with 24 GB at 600 GB/s.
    _gpu("A10G", "NVIDIA", 24, 0.600, 31.2, 125, int8=250, cc="8.6", aliases=("a10", "a10g")),
    _gpu(
        "T4",
        "NVIDIA",
        16,
        0.320,
        8.1,
        8.1,
        fp16=65,
        int8=130,
        cc_bf16=False,
        fa2=False,
        link="PCIe 3.0 x16",
        link_gbs=16,
        cc="7.5",
        aliases=("tesla t4",),
    ),
    _gpu(
        "V100",
        "NVIDIA",
        32,
        0.900,
        15.7,
        15.7,
        fp16=125,
        cc_bf16=False,
        fa2=False,
        link="NVLink 2",
        link_gbs=300,
        cc="7.0",
        aliases=("tesla v100", "v100 sxm2 32gb", "v100 32gb"),
    ),
    _gpu(
        "RTX 4090",
        "NVIDIA",
        24,
        1.008,
        82.6,
        165.2,
        fp8=330.3,
        int8=660.6,
        cc="8.9",
        aliases=("geforce rtx 4090", "4090"),
    ),
    _gpu("RTX 3090", "NVIDIA", 24, 0.936, 35.6, 35.6, int8=284, cc="8.6", aliases=("geforce rtx 3090", "3090")),
    _gpu(
        "MI300X",
        "AMD",
        192,
        5.3,
        163.4,
        1307.4,
        fp8=2614.9,
        int8=2614.9,
        fa3=False,
        link="Infinity Fabric",
        link_gbs=896,
        aliases=("instinct mi300x", "amd instinct mi300x"),
    ),
    # Apple: unified memory (the largest configuration); GPU FP32 peak, half precision at the same rate.
    _gpu(
        "Apple M2 Ultra",
        "Apple",
        192,
        0.800,
        27.2,
        27.2,
        fa2=False,
        link="unified memory",
        link_gbs=0,
        aliases=("m2 ultra",),
    ),
    _gpu(
        "Apple M3 Max",
        "Apple",
        128,
        0.400,
        14.2,
        14.2,
        fa2=False,
        link="unified memory",
        link_gbs=0,
        aliases=("m3 max",),
    ),
    _gpu(
        "Apple M4 Max",
        "Apple",
        128,
        0.546,
        18.4,
        18.4,
        fa2=False,
        link="unified memory",
        link_gbs=0,
        aliases=("m4 max",),
    ),
]


def _norm(s: str) -> str:
    s = s.lower().replace("nvidia", "").replace("geforce", "")
    return re.sub(r"[^a-z0-9]+", "", s)


def find_accelerator(name: str) -> Accelerator:
    """Look up a GPU by name or alias, forgiving case, spaces and vendor prefixes. A name that starts
    several cards' names ('A100': 40GB and 80GB) is refused with the candidates, never picked."""
    from infertune.core.validate import one_of

    key = _norm(name)
    names: dict[str, Accelerator] = {}
    for acc in ACCELERATORS:
        for alias in (acc.name, *acc.aliases):
            names.setdefault(_norm(alias), acc)
    if key in names:
        return names[key]
    starting = {acc.name: acc for alias, acc in names.items() if key and alias.startswith(key)}
    if starting:
        return one_of("gpu", name, starting, "GPU")
    close = difflib.get_close_matches(name, [a.name for a in ACCELERATORS], n=3, cutoff=0.3)
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UserError(f"unknown GPU {name!r}{hint} (known: {', '.join(a.name for a in ACCELERATORS)})")


def from_detected_gpu(gpu_name: str, total_memory_bytes: int, calibrate: bool = False) -> Accelerator:
    """The table entry for a detected card, with the card's own memory size (variants differ); `calibrate`:
    attach this host's CUDA calibration (measured once, cached; creates a CUDA context in this process)."""
    from infertune.estimate import calibration

    acc = find_accelerator(gpu_name)
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
