"""The verbs that answer without running the model: env, estimate, advise."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from infertune.advise import Advice
from infertune import validate
from infertune.api.common import Say, _quiet, input_lengths, parse_tokens
from infertune.errors import UserError
from infertune.estimate import Estimate
from infertune.hub import REVISION_DOC, revision_of
from infertune.probe.hardware import Hardware
from infertune.schema import SCHEMA_VERSION

KV_NBITS = (2, 4)  # transformers' quantized cache with the quanto backend (the one trials run)


# --- env --------------------------------------------------------------------------------------------------


class EnvReport(BaseModel):
    kind: Literal["env"] = "env"
    schema_version: str = SCHEMA_VERSION
    hardware: Hardware
    libraries: dict[str, str | None]
    python: str


def env() -> EnvReport:
    """This machine's hardware and the versions of the libraries that decide what can run."""
    from infertune.probe.hardware import detect_hardware
    from infertune.probe.versions import library_versions

    return EnvReport(hardware=detect_hardware(), libraries=library_versions(), python=sys.version.split()[0])


# --- estimate ---------------------------------------------------------------------------------------------


class EstimateSweep(BaseModel):
    kind: Literal["estimate"] = "estimate"
    schema_version: str = SCHEMA_VERSION
    model_revision: str | None = Field(None, description=REVISION_DOC)
    sweep: list[Estimate]  # one per input length


def estimate(model: str | None = None, revision: str | None = None, dtype: str = "auto",
             quantization: str | None = None, kv_cache: str = "dynamic", kv_nbits: int = 4,
             kv_residual_len: int = 128, max_cache_len: str | int | None = None, attn: str = "sdpa",
             prefill_chunk: str | int | None = None, input_len: str | int = "512", max_new_tokens: str | int = "256",
             batch: int = 1, concurrency: int = 1, gpu: str | None = None, gpus: int = 1,
             max_memory: str | None = None, cpu: bool = False, trust_remote_code: bool = False,
             say: Say = _quiet) -> Estimate | EstimateSweep:
    """Memory by component, roofline speed and what fits, from config.json alone: an `Estimate`, or an
    `EstimateSweep` when `input_len` lists several lengths ("1k,8k,32k")."""
    from infertune import models
    from infertune.config import DTYPE_ALIASES, check_attn
    from infertune.estimate import estimate as run_estimate
    from infertune.estimate.accelerators import find_accelerator, from_detected_gpu, probe_cpu
    from infertune.estimate.memory import EstimateSettings, Quantization, resolve_dtype
    from infertune.estimate.placement import parse_max_memory
    from infertune.probe.model import profile_model

    validate.check(batch=batch, concurrency=concurrency, gpus=gpus, kv_residual_len=kv_residual_len)
    lengths = parse_tokens(input_len)
    new_tokens = parse_tokens(max_new_tokens, "max_new_tokens")[0]
    cache_len = parse_tokens(max_cache_len, "max_cache_len")[0] if max_cache_len else None
    chunk = parse_tokens(prefill_chunk, "prefill_chunk")[0] if prefill_chunk else None
    validate.choice("dtype", DTYPE_ALIASES.get(dtype, dtype), ("auto", "float32", "bfloat16", "float16", "fp8"))
    validate.choice("kv_cache", kv_cache, ("dynamic", "static", "quantized", "offloaded"))
    validate.choice("kv_nbits", kv_nbits, KV_NBITS, "a quantized KV cache (quanto, what the trials run)")
    check_attn(attn)
    quant = Quantization.parse(quantization)
    budgets = parse_max_memory(max_memory)
    if budgets:  # the GPUs the budgets name (a CPU-only budget: no GPU at all)
        gpus = max([gpus, *(int(d[5:]) + 1 for d in budgets if d.startswith("cuda:"))])
    acc = find_accelerator(gpu) if gpu else None
    if acc is None and not cpu:
        from infertune.probe.hardware import detect_gpus

        found = detect_gpus()
        acc = from_detected_gpu(found[0].name, found[0].total_memory_bytes, calibrate=True) if found else None
    platform = "cpu" if acc is None or acc.vendor == "host" else ("mps" if acc.vendor == "Apple" else "cuda")
    if budgets and platform == "mps":
        raise UserError("--max-memory: Apple's unified memory is one device; give --gpu NAME for a CUDA card")
    if budgets and platform == "cpu" and any(d.startswith("cuda:") for d in budgets):
        raise UserError("--max-memory names GPUs but none is detected here; give --gpu NAME to estimate for one")
    model = model or models.DEFAULT_MODEL
    path = models.resolve(model, revision, say=say)
    prof = profile_model(path, trust_remote_code)
    resolved = resolve_dtype(dtype, prof.native_dtype)
    if acc is None:
        say("probing this CPU's bandwidth and FLOP/s")
        acc = probe_cpu()
    base = EstimateSettings(
        dtype=resolved, quantization=quant, kv_cache=kv_cache, kv_nbits=kv_nbits,
        kv_residual_len=kv_residual_len, max_cache_len=cache_len, attn=attn, prefill_chunk=chunk,
        max_new_tokens=new_tokens, batch=batch, concurrency=concurrency, platform=platform,
    )
    rev = revision_of(path)
    results = [run_estimate(prof, base.model_copy(update={"input_len": n}), acc, model=models.command_name(model, path),
                            gpus=gpus, max_memory=budgets, model_revision=rev) for n in lengths]
    return results[0] if len(results) == 1 else EstimateSweep(model_revision=rev, sweep=results)


# --- advise -----------------------------------------------------------------------------------------------


def advise(workload: str | Path | None = None, model: str | None = None, revision: str | None = None,
           gpu: str | None = None, gpus: int = 1, vram: str | None = None, cpu_ram: str | None = None,
           dtype: str | None = None, attn: str | None = None, quantization: str | None = None,
           kv_cache: str | None = None, compile: bool = False, batching: str | None = None,
           input_len: str | int | None = None, max_new_tokens: str | int | None = None, batch: int | None = None,
           concurrency: int | None = None, measured: str | Path | None = None, trust_remote_code: bool = False,
           ask: Callable[[str, int], int] | None = None, say: Say = _quiet, device_map: str | None = None,
           tp: int = 1, lib: list[str] | dict[str, str] | None = None) -> Advice:
    """Diagnose where the workload hurts and propose one compatible change: an `Advice`. Missing details
    are assumed and listed (or asked through `ask(question, default)` when given). `device_map` and `tp`
    describe the current placement; `lib` the target's library versions (NAME=VERSION)."""
    from infertune import intake, models
    from infertune.advise import advise as run_advise
    from infertune.config import check_attn, config_from
    from infertune.probe.model import profile_model
    from infertune.workload import load_run

    validate.check(batch=batch, concurrency=concurrency, gpus=gpus)
    check_attn(attn)
    intake.check_current(dtype, quantization, kv_cache, batching)
    if gpu:  # names and sizes first: nothing is read or probed for an input that will be refused
        from infertune.estimate.accelerators import find_accelerator

        find_accelerator(gpu)
    for name, size in (("--vram", vram), ("--cpu-ram", cpu_ram)):
        if size:
            intake.parse_size(size, name)
    # the run file is validated exactly as measure validates it: the workload and its config: section
    wl, cfg_data = load_run(workload, model=model, revision=revision, **input_lengths(input_len),
                            max_new_tokens=parse_tokens(max_new_tokens, "max_new_tokens")[0] if max_new_tokens else None,
                            batch=batch, concurrency=concurrency)
    cfg = config_from(cfg_data, "config")
    given = wl.model_fields_set
    n_in = wl.longest_input if given & {"input_len", "input_lens"} else None
    n_out = wl.max_new_tokens if "max_new_tokens" in given else None
    conc = wl.concurrency if "concurrency" in given else None
    model = wl.model if "model" in given else models.DEFAULT_MODEL
    trial, engines = _read_measured(measured, model) if measured is not None else (None, [])  # before any work
    # the run file's config: describes the current setup where no flag does
    dtype = dtype or (cfg.dtype if "dtype" in cfg.model_fields_set else None)
    attn = attn or cfg.attn_implementation
    kv_cache = kv_cache or cfg.cache_implementation
    batching = batching or (cfg.batching if "batching" in cfg.model_fields_set else None)
    if device_map is None and isinstance(cfg.device_map, str):
        device_map = cfg.device_map
    tp = tp if tp != 1 else cfg.tp_size
    libs = lib if isinstance(lib, dict) else intake.parse_libs(lib)
    path = models.resolve(model, wl.revision, say=say)
    prof = profile_model(path, trust_remote_code)
    intake.placement(prof, gpus, device_map, tp)  # a placement that cannot be is refused before any probe
    say("reading the hardware")
    acc, here = intake.target_hardware(gpu, vram)
    shown = models.command_name(model, path)  # how snippets and commands name it
    i = intake.build(prof, shown, acc, here, gpus=gpus, cpu_ram=cpu_ram, input_len=n_in, max_new_tokens=n_out,
                     batch=wl.batch, concurrency=conc, dtype=dtype, attn=attn,
                     quantization=quantization, kv_cache=kv_cache, compile=compile, batching=batching,
                     gpu_given=gpu is not None, ask=ask, device_map=device_map, tp=tp, libs=libs,
                     max_memory=cfg.max_memory)
    i.facts.engines_measured = engines
    assumptions = i.assumptions + [f"serving engine {e.line()}" for e in engines]
    advice = run_advise(i.facts, i.current, assumptions, i.questions, trial)
    return advice.model_copy(update={"model_revision": revision_of(path)})


def _same_model(a: str, b: str) -> bool:
    from infertune import models

    a, b = models.ALIASES.get(a, a), models.ALIASES.get(b, b)
    return a == b or (Path(a).expanduser().is_dir() and Path(a).expanduser().resolve() == Path(b).expanduser().resolve())


def _read_measured(measured: str | Path, model: str):
    """`--measured`: a measure result (a trial of the current setup), or a tune run (its directory or report.json)
    whose serve stage measured serving engines against transformers serve on this workload."""
    import json

    from infertune.measure.results import TrialResult
    from infertune.techniques.base import EngineEvidence

    path = Path(measured)
    if path.is_dir():
        path = path / "report.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"--measured: no such file {path}") from None
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("kind") == "tune-report":
        if not _same_model(str(data.get("model")), model):
            raise UserError(f"--measured: {measured} measured {data.get('model')}, not {model}")
        return None, [EngineEvidence.model_validate({**e, "source": str(measured)})
                      for e in data.get("serving_engine") or []]
    try:
        return TrialResult.model_validate(data), []
    except ValueError:
        raise UserError(f"--measured: {measured} is not a measure result (infertune measure --output FILE) nor "
                        "a tune run (its directory or report.json)") from None
