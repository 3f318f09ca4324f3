"""GPU datasheets: one row per card, the vendor's figures and where they come from (`data/gpus.toml`).

`estimate.accelerators` turns each row into an `Accelerator`; a name is found only exactly or by one of its
aliases, never by prefix (`H20` is not the `H200`). The file's header says what each figure means.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Datasheet:
    name: str
    vendor: str
    mem_gb: float
    bw_tbs: float  # memory bandwidth, TB/s
    fp32: float  # TFLOP/s, dense
    bf16: float  # tensor TFLOP/s, dense (the FP32-accumulate figure on GeForce cards)
    source: str  # the datasheet or whitepaper
    fp16: float | None = None  # when it differs from bf16 (cards without bf16 tensor cores)
    fp8: float | None = None
    int8: float | None = None
    cc: str | None = None  # NVIDIA compute capability
    cc_bf16: bool = True  # bf16 tensor cores (Ampere and later)
    fa2: bool = True  # FlashAttention 2 builds for it (Ampere and later)
    fa3: bool = False  # FlashAttention 3 (Hopper)
    link: str = "PCIe 4.0 x16"
    link_gbs: float = 32.0
    aliases: tuple[str, ...] = field(default_factory=tuple)
    mem_gib: bool = False
    note: str | None = None


@cache
def datasheets() -> tuple[Datasheet, ...]:
    text = resources.files("infertune").joinpath("data/gpus.toml").read_text(encoding="utf-8")
    rows = tomllib.loads(text)["gpu"]
    return tuple(Datasheet(**{**row, "aliases": tuple(row.get("aliases", ()))}) for row in rows)
