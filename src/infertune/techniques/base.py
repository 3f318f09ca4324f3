"""What a technique is, the settings it changes, and the facts its compatibility check reads.

A `Setup` is the advisor's view of how a model runs (the user's current settings, or a candidate): every
knob a technique may turn. A technique never changes more than its own knobs, so "one change at a time"
is a property of the catalog, not a promise of the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from infertune.estimate.accelerators import Accelerator
from infertune.probe.model import ModelProfile

Category = Literal[
    "load-memory", "kv-cache-growth", "long-input-attention", "concurrency", "decode-speed", "prefill-speed", "none"
]
CATEGORIES: tuple[str, ...] = get_args(Category)
Risk = Literal["none", "low", "medium"]
Platform = Literal["cuda", "cpu", "mps"]
RISK_ORDER = {"none": 0, "low": 1, "medium": 2}
OomPhase = Literal["load", "prefill", "decode", "host-ram"]

# infertune's weight-quantization names (the user's --quantization and the catalog's settings)
QUANTIZATIONS = (
    "none",
    "bnb-8bit",
    "bnb-4bit",
    "awq",
    "gptq",
    "gguf",
    "torchao-int4",
    "torchao-int8",
    "quanto-int8",
    "fp8",
)


class Setup(BaseModel):
    """The knobs the advisor turns. Defaults are what a plain `from_pretrained` + `generate` gives."""

    model_config = ConfigDict(extra="forbid")

    dtype: str = "float32"  # resolved: float32, bfloat16, float16
    attn: str = "sdpa"
    quantization: str = "none"
    kv_cache: Literal["dynamic", "static", "quantized", "offloaded"] = "dynamic"
    compile: bool = False
    kernels: bool = False  # use_kernels=True: fused Hub kernels for norms, MLPs, rotary
    batching: Literal["serial", "static", "continuous"] = "serial"
    max_batch_tokens: int | None = None  # continuous batching: tokens per forward (chunked prefill)
    cb_block_size: int | None = None  # continuous batching: tokens per KV block (page)
    cb_num_blocks: int | None = None  # continuous batching: KV blocks; None: generate_batch sizes from free memory
    device_map: str | None = None
    max_memory: dict[str, str] | None = None
    tp: int = 1
    pp: int = 1  # pipeline stages (machines) for a serving engine: the model outgrows one machine's GPUs
    engine: Literal["transformers", "vllm", "sglang"] = "transformers"
    # version requirements a move adds ({"bitsandbytes": ">=0.40.0"}): an upgrade changes only this
    packages: dict[str, str] | None = None
    # how from_pretrained reads the checkpoint (techniques/checkpoint.py): as stored, or from safetensors (a revision
    # that ships them, or .bin shards converted once); low_cpu_mem_usage: the model is built on the meta device
    checkpoint: Literal["as-is", "safetensors"] = "as-is"
    low_cpu_mem_usage: bool = False

    def changes(self, other: Setup) -> dict[str, object]:
        """The knobs `other` sets differently from self."""
        mine, theirs = self.model_dump(), other.model_dump()
        return {k: v for k, v in theirs.items() if mine[k] != v}


class EngineEvidence(BaseModel):
    """A serving engine against transformers serve on the user's own workload, measured on this host by a tune
    run's serve stage (report.json's `serving_engine`): the ratios the serving-engine move carries."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["measured"] = "measured"
    engine: str
    against: str  # the transformers serve variant it was compared with (the best measured one)
    concurrency: int
    objective: str  # the tune's objective: throughput, latency or memory
    objective_ratio: float | None  # engine / transformers on that objective (median of the rounds)
    band: float | None  # the ratio's band: both spreads added (None: one round)
    clear: bool  # the difference lies outside the band
    better: bool  # ... and favours the engine
    throughput_ratio: float | None = None
    ttft_p50_ratio: float | None = None
    startup_s: float | None = None
    peak_memory_bytes: int | None = None
    reference_startup_s: float | None = None
    reference_peak_memory_bytes: int | None = None
    source: str | None = None  # the run it came from

    def line(self) -> str:
        def x(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}x"

        verdict = "clearly better" if self.better else "clearly worse" if self.clear else "within the spread"
        band = f" ± {self.band:.0%}" if self.band is not None else " (one round: no spread)"
        extra = f"; start-up {self.startup_s:,.0f} s" if self.startup_s else ""
        if self.peak_memory_bytes and self.reference_peak_memory_bytes:
            mine, theirs = self.peak_memory_bytes / 2**20, self.reference_peak_memory_bytes / 2**20
            extra += f"; peak memory {mine:,.0f} vs {theirs:,.0f} MiB"
        where = f"measured{', ' + self.source if self.source else ''}"
        return (
            f"{self.engine} vs {self.against} at concurrency {self.concurrency} ({where}): "
            f"{self.objective} {x(self.objective_ratio)}{band}, {verdict}; "
            + ("" if self.objective == "throughput" else f"throughput {x(self.throughput_ratio)}, ")
            + f"TTFT p50 {x(self.ttft_p50_ratio)}{extra}"
        )


class Observed(BaseModel):
    """What the user saw on the current setup (--observed KEY=VALUE, --oom PHASE): their report, not a measurement
    of ours. Every figure is optional; times in seconds, memory in bytes."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["observed"] = "observed"
    tpot_s: float | None = None  # time per generated token
    ttft_s: float | None = None  # time to the first token
    e2e_s: float | None = None  # one whole request
    tokens_per_s: float | None = None  # generated tokens per second (all sequences)
    peak_bytes: int | None = None  # the peak memory they saw
    oom: OomPhase | None = None  # where it ran out of memory

    def empty(self) -> bool:
        return all(v is None for k, v in self.model_dump().items() if k != "kind")


@dataclass
class Facts:
    """What compatibility checks may read: the model, the workload's shape, the target hardware and software."""

    profile: ModelProfile
    model: str  # how the user names the model (for snippets and commands)
    input_len: int
    max_new_tokens: int
    batch: int
    concurrency: int
    accelerator: Accelerator
    gpus: int
    platform: Platform
    cpu_ram_bytes: int | None = None
    # Installed versions on the target (None: not installed). `packages_known` is False when the target is
    # another machine (--gpu NAME): then a needed package is an open question, not a rejection.
    packages: dict[str, str | None] = field(default_factory=dict)
    packages_known: bool = True
    # Versions the user stated for the target (--lib NAME=VERSION): known, whatever the host has.
    stated: dict[str, str] = field(default_factory=dict)
    # serving engines measured against transformers serve on this workload and host (a tune run's serve stage)
    engines_measured: list[EngineEvidence] = field(default_factory=list)
    # what the user saw on the current setup (None: nothing stated)
    observed: Observed | None = None

    @property
    def cc(self) -> float | None:
        c = self.accelerator.compute_capability
        return float(c) if c else None

    def known(self, package: str) -> bool:
        """Whether the target's version of `package` is known (stated, or read on this host)."""
        return package in self.stated or self.packages_known

    def installed(self, package: str) -> str | None:
        return self.stated.get(package) or (self.packages.get(package) if self.packages_known else None)

    def version(self, package: str) -> tuple[int, ...] | None:
        v = self.installed(package)
        return parse_version(v) if v else None


def parse_version(v: str) -> tuple[int, ...]:
    """'0.39.1' -> (0, 39, 1); '2.4.1+cu121' -> (2, 4, 1); a missing part counts 0."""
    parts = []
    for p in v.lstrip(">=~ ").split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts)))


@dataclass
class Check:
    """A compatibility verdict: `blockers` reject the technique; `issues` are open items (install X)."""

    blockers: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    # upgrades the move brings with it ({"transformers": ">=4.36.0"}): a feature the target's version lacks that a
    # drop-in upgrade of the same library adds (techniques.versions); the advisor sets them in the move's packages
    requires: dict[str, str] = field(default_factory=dict)

    def need_platform(self, f: Facts, *platforms: str, why: str = "") -> Check:
        if f.platform not in platforms:
            where = {"cuda": "a CUDA GPU", "mps": "Apple silicon (mps)", "cpu": "the CPU"}
            self.blockers.append(
                f"needs {' or '.join(where[p] for p in platforms)}; the target is "
                f"{f.accelerator.name}" + (f" ({why})" if why else "")
            )
        return self

    def need_package(self, f: Facts, package: str, pip: str | None = None, min_version: tuple[int, ...] = ()) -> Check:
        pip = pip or package
        if not f.known(package):
            self.issues.append(f"needs `{pip}` on the target machine (not checked: the target is not this host)")
            return self
        v = f.version(package)
        if v is None:
            self.issues.append(f"needs `pip install {pip}` (not installed here)")
        elif min_version and v < min_version:
            need = ".".join(map(str, min_version))
            self.blockers.append(f"needs {package} >= {need}; installed: {f.installed(package)}")
        return self

    def need(self, condition: bool, reason: str) -> Check:
        if not condition:
            self.blockers.append(reason)
        return self


class Technique:
    """One change. Subclasses set the class attributes and override `check` and `apply`."""

    id: str = ""
    family: str = ""
    title: str = ""
    addresses: tuple[Category, ...] = ()
    priority: int = 50  # the expert's order among techniques that address the same problem: try lower first
    tradeoffs: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    quality_risk: Risk = "none"  # what the outputs may lose: none (same numerics), low, medium
    # its effect is a known problem the estimate does not model: it helps where its factor shows a faster
    # decode, or where the estimate fits and so cannot explain the trouble (upgrade.py)
    cures_known_problem: bool = False
    # measured by a tune's serve stage under load (an engine), never by a single trial (serving.py)
    measured_when_served: bool = False

    def rank(self, f: Facts) -> int:
        """The priority for these facts (most techniques: a constant)."""
        return self.priority

    def applied(self, s: Setup) -> bool:
        """Already in effect in `s` (then it is not a candidate at all)."""
        return False

    def candidates(self, f: Facts, s: Setup) -> list[Setup]:
        """The moves from `s` that change something (none when the technique is already in effect)."""
        return [] if self.applied(s) else [m for m in self.moves(f, s) if m != s]

    def moves(self, f: Facts, s: Setup) -> list[Setup]:
        """The setups this technique moves `s` to: one knob set to another value (with its documented
        companions). Most techniques have one target; dtype and quantization have one per value."""
        return [self.apply(f, s)]

    def risk(self, f: Facts, before: Setup, after: Setup) -> Risk:
        """The quality risk this move adds (a move back to full precision adds none)."""
        return self.quality_risk

    def tradeoffs_for(self, f: Facts, s: Setup) -> list[str]:
        """The trade-offs that apply to this setup on this target (default: all of them)."""
        return list(self.tradeoffs)

    def check(self, f: Facts, s: Setup) -> Check:
        return Check()

    def apply(self, f: Facts, s: Setup) -> Setup:
        raise NotImplementedError

    def addressed(self, before: Setup, after: Setup) -> tuple[Category, ...]:
        """What this move addresses (most techniques: always their `addresses`)."""
        return self.addresses

    def known_issues(self, before: Setup, after: Setup) -> list[str]:
        """Open items this move brings beyond its compatibility check (a known problem it removes, say)."""
        return []

    def note(self, before: Setup, after: Setup) -> str | None:
        """What the estimate cannot show about this move (a gain beyond the roofline's view), if anything."""
        return None

    def evidence(self, f: Facts, after: Setup) -> list[EngineEvidence]:
        """This move measured on the user's workload and host (a tune run's serve stage), when it was."""
        return []


REGISTRY: dict[str, Technique] = {}


def register(cls: type[Technique]) -> type[Technique]:
    """Class decorator: one instance per technique id, in declaration order."""
    inst = cls()
    if inst.id in REGISTRY:
        raise ValueError(f"duplicate technique id {inst.id!r}")
    REGISTRY[inst.id] = inst
    return cls


HF = "https://huggingface.co/docs/transformers/main/en/"
OVERVIEW = HF + "optimization_overview"
