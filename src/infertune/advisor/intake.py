"""Intake: turn what the user said (flags, a run file) plus what this host can detect into the advisor's
Facts and current Setup. For a missing detail that changes the answer: ask when a person is there (the
`ask` callback), otherwise take a stated default, listed under `assumptions`, and put the follow-up
question under `questions`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata

from infertune.advisor.accelerate_map import SPREAD_MAPS, offloaded_as_stated
from infertune.core.errors import UserError
from infertune.estimate.accelerators import Accelerator, find_accelerator, from_detected_gpu, probe_cpu
from infertune.estimate.memory import resolve_dtype
from infertune.probe.model import ModelProfile
from infertune.techniques import QUANTIZATIONS, Facts, Setup
from infertune.techniques.base import Observed, Platform, parse_version

# Packages whose presence changes what can run; checked on this host only.
PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "kernels",
    "flash_attn",
    "flash_attn_3",
    "bitsandbytes",
    "torchao",
    "optimum.quanto",
    "gptqmodel",
    "vllm",
)
DEFAULTS = {"input_len": 512, "max_new_tokens": 256, "concurrency": 1}

Ask = Callable[[str, int], int]  # (question, default) -> answer


@dataclass
class Intake:
    facts: Facts
    current: Setup
    assumptions: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)


def installed_packages() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        dist = {"optimum.quanto": "optimum-quanto", "flash_attn": "flash-attn"}.get(name, name)
        try:
            out[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def parse_size(text: str, flag: str) -> int:
    from accelerate.utils import convert_file_size_to_int

    try:
        n = int(convert_file_size_to_int(text.strip()))
    except (ValueError, AttributeError):
        raise UserError(f"{flag}: cannot read the size {text!r}; e.g. 24GiB, 80GB, 512MiB") from None
    if n <= 0:
        raise UserError(f"{flag}: the size must be positive")
    return n


CPUINFO_FLAG = re.compile(r"^[a-z0-9_.]+$")  # how /proc/cpuinfo (and lscpu) spell a flag
# the real AVX/AMX flags the CPU estimate has no term for (Linux arch/x86/include/asm/cpufeatures.h); any other
# avx*/amx* word is a typo of one it reads and is refused
OTHER_VECTOR_FLAGS = (
    "avx avx512bw avx512cd avx512dq avx512er avx512pf avx512vl avx512ifma avx512vbmi avx512_vbmi2 avx512_bitalg "
    "avx512_vpopcntdq avx512_4vnniw avx512_4fmaps avx512_vp2intersect avx_vnni_int8 avx_vnni_int16 avx_ifma "
    "avx_ne_convert amx_complex"
)


def speed_flags(cpu_flags: str | list[str] | None) -> str | None:
    """--cpu-flags as the user pasted them (often /proc/cpuinfo's whole list): the flags the CPU estimate reads
    (avx2, avx512f, avx512_bf16, amx_bf16, ...), the other real flags (avx512bw, sse4_2, fpu, ...) dropped since
    they change no estimate; a word that cannot be a flag, or an avx*/amx* word that is none, is refused by
    cpus.parse_flags (one line)."""
    from infertune.estimate import cpus

    if cpu_flags is None:
        return None
    items = cpu_flags.split(",") if isinstance(cpu_flags, str) else [x for t in cpu_flags for x in str(t).split(",")]
    kept = []
    for raw in (x.strip() for x in items):
        try:
            cpus.parse_flags(raw)
        except UserError:
            word = raw.lower().replace("-", "_")
            if word in OTHER_VECTOR_FLAGS.split() or (CPUINFO_FLAG.match(word) and not word.startswith(("avx", "amx"))):
                continue  # a real flag the estimate has no term for
        kept.append(raw)
    return ",".join(kept)


def target_hardware(
    gpu: str | None,
    vram: str | None,
    cpu: bool | str | None = False,
    cpu_flags: str | list[str] | None = None,
    cores: int | None = None,
    cpu_ram: str | None = None,
) -> tuple[Accelerator, bool]:
    """(accelerator, is_this_host). --gpu names a card (another machine, perhaps); --cpu NAME (or --cpu-flags /
    --cores) a CPU target, from the table (estimate/cpus.py), never probed here; else the detected GPU; else (or
    with a bare --cpu) this host's CPU, probed. --vram overrides a GPU's memory (a partly used or smaller variant);
    --cpu-ram is a CPU target's memory."""
    from infertune.estimate import cpus

    named = cpu if isinstance(cpu, str) and cpu else None
    flags = cpus.parse_flags(speed_flags(cpu_flags))
    if gpu and (named or flags is not None or cores):
        raise UserError("--gpu and --cpu NAME/--cpu-flags/--cores name two targets: give one")
    ram = parse_size(cpu_ram, "--cpu-ram") if cpu_ram else None
    if gpu:
        acc, here = find_accelerator(gpu), False
    elif named or flags is not None or cores:
        base = cpus.as_accelerator(cpus.find_cpu(named), ram) if named else None
        return cpus.described(base, flags, cores, ram), False
    else:
        from infertune.probe.hardware import detect_gpus

        found = [] if cpu else detect_gpus()
        acc = from_detected_gpu(found[0].name, found[0].total_memory_bytes, calibrate=True) if found else probe_cpu()
        here = True
        if ram and acc.platform == "cpu":
            acc = acc.model_copy(update={"memory_bytes": ram})
    if vram:
        acc = acc.model_copy(update={"memory_bytes": parse_size(vram, "--vram")})
    return acc, here


def check_target(
    gpu: str | None, cpu: bool | str | None, cpu_flags: str | list[str] | None, cores: int | None, cpu_ram: str | None
) -> None:
    """The target's names and sizes, refused before anything is read or probed (one line each)."""
    from infertune.estimate import cpus

    if gpu:
        find_accelerator(gpu)
    if isinstance(cpu, str) and cpu:
        cpus.find_cpu(cpu)
    cpus.parse_flags(speed_flags(cpu_flags))
    if cores is not None and not 1 <= cores <= 4096:
        raise UserError(f"--cores {cores}: takes 1 to 4096")
    if gpu and ((isinstance(cpu, str) and cpu) or cpu_flags or cores):
        raise UserError("--gpu and --cpu NAME/--cpu-flags/--cores name two targets: give one")
    if cpu_ram:
        parse_size(cpu_ram, "--cpu-ram")


def observed_from(observed: list[str] | Mapping[str, object] | None, oom: str | None) -> Observed | None:
    """--observed KEY=VALUE (or a mapping: a run file's observed: section, an API dict) and --oom PHASE as the
    advisor's `Observed`; None when nothing was stated. Parsed and checked in core.validate (one line each)."""
    from infertune.core.validate import OOM_PHASES, choice, observations

    seen = observations(observed)
    if oom is not None:
        seen["oom"] = choice("oom", oom.strip().lower(), OOM_PHASES, "the phase that ran out of memory")
    names = {"tpot": "tpot_s", "ttft": "ttft_s", "e2e": "e2e_s", "peak": "peak_bytes"}
    fields = {names.get(k, k): (int(v) if k == "peak" else v) for k, v in seen.items()}
    return Observed(**fields) if fields else None


def parse_libs(items: list[str] | None) -> dict[str, str]:
    """--lib NAME=VERSION (repeatable) -> {name: version}."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, version = item.partition("=")
        name, version = name.strip().lower().replace("_", "-"), version.strip()
        if not sep or not name or not version or not version[0].isdigit():
            raise UserError(f"--lib: expected NAME=VERSION (e.g. bitsandbytes=0.39.1), got {item!r}")
        parse_version(version)
        out[{"flash-attn": "flash_attn", "optimum-quanto": "optimum.quanto"}.get(name, name)] = version
    return out


def checkpoint_quantization(profile: ModelProfile) -> str | None:
    """infertune's name for the quantization a checkpoint ships (its config.json quantization_config)."""
    q = profile.quantization or {}
    method = q.get("quant_method")
    if method == "bitsandbytes":
        return "bnb-4bit" if q.get("load_in_4bit") else "bnb-8bit"
    return method if method in ("awq", "gptq", "fp8") else None


def placement(
    profile: ModelProfile, gpus: int, device_map: str | None, tp: int, budgets: bool = False
) -> tuple[str | None, int]:
    """The current placement as the estimator sees it: device_map spread over the GPUs (or placed by
    max_memory budgets, `budgets`), or tp ranks."""

    if device_map is not None and tp > 1:
        raise UserError("--device-map and --tp exclude each other: tensor parallelism places the weights itself")
    if tp > 1:
        if tp > gpus:
            raise UserError(f"--tp {tp} needs as many GPUs: say --gpus {tp} (or more)")
        # what the user runs, wherever it runs: a serving engine shards a model transformers has no plan for, and
        # replicates KV heads below the rank count; only the attention heads must split
        if profile.num_attention_heads % tp:
            raise UserError(f"--tp {tp}: tp size {tp} does not divide {profile.num_attention_heads} attention heads")
    if device_map is None:
        return None, tp
    if device_map in SPREAD_MAPS:  # over one GPU without budgets it is one device
        return ("auto" if gpus > 1 or budgets else None), 1
    if device_map == "cpu" or device_map.split(":")[0] in ("cuda", "mps") or device_map.isdigit():
        return None, 1  # one device: what the estimate assumes without a map
    raise UserError(f"--device-map: unknown {device_map!r}; use auto, balanced, sequential, cpu or cuda:N")


def sharding_server(tp: int, batching: str | None) -> bool:
    """--tp N with --batching continuous: a server that shards and batches (vLLM, TGI --num-shard, SGLang), since
    transformers' continuous batching keeps its paged cache on one device. Intake describes what the user runs,
    wherever it runs: such a setup is read as a serving engine, not refused."""
    return tp > 1 and batching == "continuous"


def check_current(
    dtype: str | None, quantization: str | None, kv_cache: str | None, batching: str | None, tp: int = 1
) -> None:
    """The current setup's names, refused before anything is read when unknown (one line, the choices)."""
    from infertune.core.config import DTYPE_ALIASES
    from infertune.core.validate import choice

    if dtype is not None:
        choice("dtype", DTYPE_ALIASES.get(dtype.lower(), dtype.lower()), ("auto", "float32", "bfloat16", "float16"))
    if quantization is not None:
        choice("quantization", quantization.lower(), QUANTIZATIONS)
    if kv_cache is not None:
        choice("kv_cache", kv_cache, ("dynamic", "static", "quantized", "offloaded"))
    if batching is not None:
        choice("batching", batching, ("serial", "static", "continuous"))


def platform_of(acc: Accelerator) -> Platform:
    return acc.platform


def build(
    profile: ModelProfile,
    model: str,
    acc: Accelerator,
    on_this_host: bool,
    *,
    gpus: int = 1,
    cpu_ram: str | None = None,
    input_len: int | None = None,
    max_new_tokens: int | None = None,
    batch: int = 1,
    concurrency: int | None = None,
    dtype: str | None = None,
    attn: str | None = None,
    quantization: str | None = None,
    kv_cache: str | None = None,
    compile: bool = False,
    batching: str | None = None,
    gpu_given: bool = False,
    ask: Ask | None = None,
    device_map: str | None = None,
    tp: int = 1,
    libs: dict[str, str] | None = None,
    max_memory: dict[str, str] | None = None,
    observed: Observed | None = None,
    load_kwargs: dict[str, object] | None = None,
) -> Intake:
    assumptions: list[str] = []
    questions: list[str] = []

    def detail(name: str, value: int | None, question: str, flag: str) -> int:
        if value is not None:
            return value
        default = DEFAULTS[name]
        if ask is not None:
            return ask(question, default)
        assumptions.append(f"{name} = {default} (not given; {flag} sets it)")
        questions.append(question)
        return default

    platform = platform_of(acc)
    if on_this_host and not gpu_given and ask is None:
        what = "this host's CPU (no GPU detected and none named)" if platform == "cpu" else f"this host's {acc.name}"
        assumptions.append(
            f"hardware = {what}: nothing else was stated (--gpu NAME, or --cpu NAME / --cpu-flags / --cores for a "
            "CPU target, describe another machine)"
        )
        if platform == "cpu":
            questions.append("Which GPU will run this, if any? (--gpu NAME, e.g. L4, A100 80GB, H100 SXM)")
    elif platform == "cpu" and acc.cpu_flags is not None and not cpu_ram:
        assumptions.append(
            f"RAM of the target {acc.name} = {acc.memory_bytes / 2**30:.0f} GiB (16 GiB per memory channel, "
            "not given; --cpu-ram sets it)"
        )
    n_in = detail("input_len", input_len, "How long are the prompts, in tokens?", "--input-len")
    n_out = detail(
        "max_new_tokens", max_new_tokens, "How many tokens does each request generate at most?", "--max-new-tokens"
    )
    conc = detail("concurrency", concurrency, "How many requests are in flight at once?", "--concurrency")

    ram = None
    if cpu_ram:
        ram = parse_size(cpu_ram, "--cpu-ram")
    elif platform == "cpu" and not on_this_host:  # a stated CPU target: its memory is its RAM
        ram = acc.memory_bytes
    elif on_this_host:
        import psutil

        ram = psutil.virtual_memory().total
    else:
        assumptions.append("CPU RAM of the target unknown: CPU offload budgets left out (--cpu-ram sets it)")

    check_current(dtype, quantization, kv_cache, batching)
    resolved = resolve_dtype(dtype or "auto", profile.native_dtype)
    if dtype is None:
        assumptions.append(
            f"dtype = auto: transformers 5 loads the checkpoint's dtype ({resolved}); "
            "say --dtype float32 if your code forces fp32"
        )
    attn_now = attn or ("sdpa" if profile.supports.get("sdpa", True) else "eager")
    if attn is None:
        assumptions.append(f"attention = {attn_now} (transformers' default for this model; --attn sets it)")
    shipped = checkpoint_quantization(profile)
    quant = (quantization or shipped or "none").lower()
    if quantization is None and shipped:
        assumptions.append(f"quantization = {shipped}: the checkpoint ships it (quantization_config)")
    if quant not in QUANTIZATIONS:
        raise UserError(f"--quantization: unknown {quantization!r}; use one of {', '.join(QUANTIZATIONS)}")
    kv = kv_cache or "dynamic"
    mode = batching or "serial"
    if batching is None and conc > 1:
        assumptions.append(
            "batching = serial: each request is its own generate call (what a plain web handler "
            "does); --batching static|continuous if not"
        )
    if compile and kv != "static":
        kv = "static"  # generate compiles only with a static cache
    dmap, tp_now = placement(profile, gpus, device_map, tp, bool(max_memory))
    engine = "vllm" if sharding_server(tp_now, mode) else "transformers"
    if engine != "transformers":
        assumptions.append(
            f"engine = a serving engine (--tp {tp_now} with --batching continuous: vLLM, TGI or SGLang sharding over "
            f"{tp_now} GPUs with paged, continuous batching; transformers' own continuous batching does not shard), "
            "estimated as vLLM"
        )
    current = Setup(
        dtype=resolved,
        attn=attn_now,
        quantization=quant,
        kv_cache=kv,
        compile=compile,
        batching=mode,
        max_batch_tokens=None,
        device_map=dmap,
        tp=tp_now,
        engine=engine,
        max_memory=max_memory if dmap else None,
        checkpoint="safetensors" if (load_kwargs or {}).get("use_safetensors") else "as-is",
        low_cpu_mem_usage=bool((load_kwargs or {}).get("low_cpu_mem_usage")),
    )

    packages = installed_packages()
    stated = dict(libs or {})
    if not on_this_host and not stated:
        questions.append(
            "Which library versions run on the target (torch, transformers, bitsandbytes, ...)? "
            "Say --lib NAME=VERSION; until then a needed package is an open question"
        )
    facts = Facts(
        profile=profile,
        model=model,
        input_len=n_in,
        max_new_tokens=n_out,
        batch=batch,
        concurrency=conc,
        accelerator=acc,
        gpus=gpus,
        platform=platform,
        cpu_ram_bytes=ram,
        packages=packages,
        packages_known=on_this_host,
        stated=stated,
        observed=observed,
    )
    current, offload = offloaded_as_stated(facts, current, device_map)
    assumptions += [offload] if offload else []
    return Intake(facts=facts, current=current, assumptions=assumptions, questions=questions)
