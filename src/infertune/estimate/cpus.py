"""CPU targets from vendor datasheets: cores, clocks, memory channels, ISA flags; FLOP/s derived, never measured.

A stated CPU (`--cpu NAME`, or `--cpu-flags` / `--cores` beside it) is another machine: its speed comes from
this table, and this host's probe and calibration never apply to it.

The derivation, once for every entry (dense peak; the expected model applies CPU_FLOPS_EFF on top):

    FLOP/s(dtype) = sum over core groups of cores x base clock x FLOP per cycle per core (dtype)

    float32    2 (FMA) x FMA pipes x 32-bit lanes: AVX-512 with two FMA pipes 2 x 2 x 16 = 64; AVX2 with two
               256-bit pipes (Zen 2-4, Golden Cove, Raptor Cove) 2 x 2 x 8 = 32; Gracemont E-cores and Neoverse
               N1, two 128-bit pipes: 16; Neoverse V1 (2 x 256-bit SVE) and V2 (4 x 128-bit): 32
    bfloat16   AMX-BF16: 1024 per cycle per core (Intel's AMX figure); AVX512_BF16 / ARM BF16 dot products:
               2 x float32 (two bf16 products per 32-bit lane); no native bf16: float32 / CPU_EMULATED_SLOWDOWN
               (PyTorch converts around fp32 kernels), so `techniques.factors` sees a CPU without bf16
    float16    AMX-FP16: 1024; AVX512_FP16 / ARM asimdhp: 2 x float32; else float32 / CPU_EMULATED_SLOWDOWN
    int8       AMX-INT8: 2048; AVX512_VNNI / AVX-VNNI / ARM dot product: 4 x float32 (four int8 products per lane)

Memory bandwidth: channels x MT/s x 8 bytes (the datasheet's fastest supported DIMM speed). Memory size is the
target's RAM (`--cpu-ram`); without it, DEFAULT_RAM_PER_CHANNEL per channel, stated under assumptions.
Each entry cites its datasheet page (cores, base clock, memory channels and speed, instruction sets).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from infertune.core.errors import UserError
from infertune.estimate.accelerators import Accelerator, GiB
from infertune.estimate.factors import CPU_EMULATED_SLOWDOWN

DEFAULT_RAM_PER_CHANNEL = 16 * GiB  # one 16 GiB DIMM per channel: a cautious guess, said under assumptions

AVX512 = ("avx2", "fma", "avx512f", "avx512_vnni")
SPR = (*AVX512, "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")
ZEN4 = (*AVX512, "avx512_bf16")
ARM_V = ("asimd", "asimdhp", "asimddp", "bf16", "i8mm", "sve")
# the flags --cpu-flags knows (as /proc/cpuinfo spells them); avx512 is read as avx512f
KNOWN_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "asimdhp",
    "asimddp",
    "bf16",
    "i8mm",
    "sve",
)
ARK = "https://ark.intel.com/content/www/us/en/ark/search.html?_charset_=UTF-8&q="
AMD = "https://www.amd.com/en/products/processors/"


@dataclass(frozen=True)
class Cpu:
    name: str
    vendor: str
    groups: tuple[tuple[int, float, int], ...]  # (cores, base GHz, float32 FLOP per cycle per core)
    channels: int
    mts: int  # memory transfers per second (millions): DDR5-4800 -> 4800
    flags: tuple[str, ...]
    source: str
    aliases: tuple[str, ...] = ()

    @property
    def cores(self) -> int:
        return sum(g[0] for g in self.groups)


CPUS: tuple[Cpu, ...] = (
    Cpu("Xeon Platinum 8480+", "Intel", ((56, 2.0, 64),), 8, 4800, SPR, ARK + "8480%2B", ("sapphire rapids", "8480+")),
    Cpu("Xeon Platinum 8592+", "Intel", ((64, 1.9, 64),), 8, 5600, SPR, ARK + "8592%2B", ("emerald rapids", "8592+")),
    Cpu(
        "Xeon 6980P",
        "Intel",
        ((128, 2.0, 64),),
        12,
        6400,
        (*SPR, "amx_fp16"),
        ARK + "6980P",
        ("granite rapids", "xeon 6 6980p"),
    ),
    Cpu("Xeon Platinum 8380", "Intel", ((40, 2.3, 64),), 8, 3200, AVX512, ARK + "8380", ("ice lake", "ice lake sp")),
    Cpu("Xeon Platinum 8280", "Intel", ((28, 2.7, 64),), 6, 2933, AVX512, ARK + "8280", ("cascade lake",)),
    Cpu(
        "EPYC 9654",
        "AMD",
        ((96, 2.4, 32),),
        12,
        4800,
        ZEN4,
        AMD + "server/epyc/4th-generation-9004-and-8004-series/amd-epyc-9654.html",
        ("genoa",),
    ),
    Cpu(
        "EPYC 9755",
        "AMD",
        ((128, 2.7, 64),),
        12,
        6000,
        ZEN4,
        AMD + "server/epyc/9005-series/amd-epyc-9755.html",
        ("turin",),
    ),
    Cpu(
        "EPYC 7763",
        "AMD",
        ((64, 2.45, 32),),
        8,
        3200,
        ("avx2", "fma"),
        AMD + "server/epyc/7003-series/amd-epyc-7763.html",
        ("milan",),
    ),
    Cpu(
        "EPYC 7742",
        "AMD",
        ((64, 2.25, 32),),
        8,
        3200,
        ("avx2", "fma"),
        AMD + "server/epyc/7002-series/amd-epyc-7742.html",
        ("rome",),
    ),
    Cpu("Core i9-14900K", "Intel", ((8, 3.2, 32), (16, 2.4, 16)), 2, 5600, ("avx2", "fma", "avx_vnni"), ARK + "14900K"),
    Cpu("Core i9-13900K", "Intel", ((8, 3.0, 32), (16, 2.2, 16)), 2, 5600, ("avx2", "fma", "avx_vnni"), ARK + "13900K"),
    Cpu("Core i7-14700K", "Intel", ((8, 3.4, 32), (12, 2.5, 16)), 2, 5600, ("avx2", "fma", "avx_vnni"), ARK + "14700K"),
    Cpu("Core i7-13700K", "Intel", ((8, 3.4, 32), (8, 2.5, 16)), 2, 5600, ("avx2", "fma", "avx_vnni"), ARK + "13700K"),
    Cpu(
        "Ryzen 9 7950X",
        "AMD",
        ((16, 4.5, 32),),
        2,
        5200,
        ZEN4,
        AMD + "desktops/ryzen/7000-series/amd-ryzen-9-7950x.html",
    ),
    Cpu(
        "Ryzen 7 7700X",
        "AMD",
        ((8, 4.5, 32),),
        2,
        5200,
        ZEN4,
        AMD + "desktops/ryzen/7000-series/amd-ryzen-7-7700x.html",
    ),
    Cpu(
        "Ryzen 9 9950X",
        "AMD",
        ((16, 4.3, 64),),
        2,
        5600,
        ZEN4,
        AMD + "desktops/ryzen/9000-series/amd-ryzen-9-9950x.html",
    ),
    Cpu(
        "Ryzen 7 9700X",
        "AMD",
        ((8, 3.8, 64),),
        2,
        5600,
        ZEN4,
        AMD + "desktops/ryzen/9000-series/amd-ryzen-7-9700x.html",
    ),
    Cpu("Graviton3", "AWS", ((64, 2.6, 32),), 8, 4800, ARM_V, "https://aws.amazon.com/ec2/graviton/", ("graviton 3",)),
    Cpu("Graviton4", "AWS", ((96, 2.8, 32),), 12, 5600, ARM_V, "https://aws.amazon.com/ec2/graviton/", ("graviton 4",)),
    Cpu(
        "Ampere Altra Q80-30",
        "Ampere",
        ((80, 3.0, 16),),
        8,
        3200,
        ("asimd", "asimdhp", "asimddp"),
        "https://amperecomputing.com/briefs/ampere-altra-family-product-brief",
        ("ampere altra", "altra"),
    ),
)


def flop_rates(groups: tuple[tuple[int, float, int], ...], flags: set[str]) -> dict[str, float]:
    """FLOP/s per compute dtype from the core groups and the ISA flags (the derivation in the module's doc)."""
    fp32 = sum(n * ghz * 1e9 * per for n, ghz, per in groups)
    cores_ghz = sum(n * ghz * 1e9 for n, ghz, _ in groups)
    slow = fp32 / CPU_EMULATED_SLOWDOWN
    bf16 = 1024 * cores_ghz if "amx_bf16" in flags else 2 * fp32 if flags & {"avx512_bf16", "bf16"} else slow
    fp16 = 1024 * cores_ghz if "amx_fp16" in flags else 2 * fp32 if flags & {"avx512_fp16", "asimdhp"} else slow
    int8 = (
        2048 * cores_ghz
        if "amx_int8" in flags
        else 4 * fp32
        if flags & {"avx512_vnni", "avx_vnni", "asimddp"}
        else fp32
    )
    return {"float32": fp32, "bfloat16": bf16, "float16": fp16, "int8": int8}


def as_accelerator(cpu: Cpu, ram_bytes: int | None = None) -> Accelerator:
    bandwidth = cpu.channels * cpu.mts * 1e6 * 8
    return Accelerator(
        name=cpu.name,
        vendor=cpu.vendor,
        memory_bytes=ram_bytes or cpu.channels * DEFAULT_RAM_PER_CHANNEL,
        bandwidth_Bps=bandwidth,
        flops=flop_rates(cpu.groups, set(cpu.flags)),
        bf16=True,
        fp8=False,
        flash_attn_2=False,
        flash_attn_3=False,
        interconnect="host memory",
        interconnect_Bps=bandwidth,
        source=f"datasheet ({cpu.source}); FLOP/s derived from cores x clock x vector width",
        cpu_flags=sorted(cpu.flags),
        cores=cpu.cores,
    )


def _norm(s: str) -> str:
    s = s.lower().replace("intel", "").replace("amd", "").replace("aws", "").replace("(r)", "")
    return re.sub(r"[^a-z0-9+]+", "", s)


def find_cpu(name: str) -> Cpu:
    """A CPU by its name or an alias (case, spaces and the vendor's name forgiven), never by a prefix: an unknown
    name is one line with the closest names."""
    key = _norm(name)
    for cpu in CPUS:
        if key in {_norm(a) for a in (cpu.name, *cpu.aliases)}:
            return cpu
    names = [c.name for c in CPUS]
    labels = {_norm(a): c.name for c in CPUS for a in (c.name, *c.aliases)}
    close = [labels[k] for k in difflib.get_close_matches(key, list(labels), n=6, cutoff=0.5)]
    close = list(dict.fromkeys(close))[:3]
    hint = f"; closest: {', '.join(close)}" if close else ""
    raise UserError(
        f"--cpu: unknown CPU {name!r}{hint} (known: {', '.join(names)}; or describe it with --cpu-flags and --cores)"
    )


def parse_flags(text: str | list[str] | None) -> set[str] | None:
    """--cpu-flags avx512_bf16,amx_bf16,... -> the flags (avx512 read as avx512f); one line for an unknown flag."""
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else [x for t in text for x in str(t).split(",")]
    out: set[str] = set()
    for raw in items:
        f = raw.strip().lower().replace("-", "_")
        f = {"avx512": "avx512f", "avx512bf16": "avx512_bf16", "amx": "amx_bf16"}.get(f, f)
        if not f:
            continue
        if f not in KNOWN_FLAGS:
            raise UserError(f"--cpu-flags: unknown flag {raw.strip()!r}; known: {', '.join(KNOWN_FLAGS)}")
        out.add(f)
    return out


def described(
    base: Accelerator | None, flags: set[str] | None, cores: int | None, ram_bytes: int | None
) -> Accelerator:
    """A stated CPU: a table entry (`base`) or, without one, a generic server core at 2.5 GHz (AVX2 unless the
    flags say more), with --cpu-flags / --cores / --cpu-ram replacing what they state."""
    if base is None:
        n = cores or 16
        per = 64 if flags and "avx512f" in flags else 32
        cpu = Cpu(f"CPU ({n} cores, stated)", "stated", ((n, 2.5, per),), 8, 4800, tuple(sorted(flags or {"avx2"})), "")
        acc = as_accelerator(cpu, ram_bytes).model_copy(
            update={"source": "stated (--cpu-flags/--cores): a 2.5 GHz core, 8 channels of DDR5-4800 assumed"}
        )
        return acc
    update: dict[str, object] = {}
    if ram_bytes:
        update["memory_bytes"] = ram_bytes
    if flags is not None or cores:
        cpu = find_cpu(base.name)
        n = cores or cpu.cores
        scale = n / cpu.cores  # fewer cores (a VM's share): the same cores, fewer of them
        groups = tuple((max(1, round(c * scale)), ghz, per) for c, ghz, per in cpu.groups)
        fl = flags if flags is not None else set(cpu.flags)
        update |= {"flops": flop_rates(groups, fl), "cpu_flags": sorted(fl), "cores": n}
    return base.model_copy(update=update)


__all__ = ["CPUS", "Cpu", "as_accelerator", "described", "find_cpu", "flop_rates", "parse_flags"]
